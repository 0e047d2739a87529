"""A replica follows reported state exactly while it runs the rollouts
(:class:`controller.ingest.report_duty.ReportDuty` on a real :class:`MqttBus` and Mosquitto).

Taking the lease subscribes, and the broker hands over each device's retained report at once;
losing it unsubscribes, and reports stop arriving; taking it again brings the latest one
(what was sent meanwhile)."""

from __future__ import annotations

import threading
import time
import uuid

from controller.ingest.report_duty import ReportDuty
from controller.mqtt_bus import MqttBus
from shared.topics import Channel, Topics
from tests.integration.controller.conftest import poll


class Inbox:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.payloads: list[bytes] = []

    def put(self, _topic: str, payload: bytes) -> None:
        with self._lock:
            self.payloads.append(payload)

    def copy(self) -> list[bytes]:
        with self._lock:
            return list(self.payloads)


def test_reports_are_followed_while_leading_and_the_retained_one_arrives_on_taking_the_lease(
    mosquitto: str,
) -> None:
    topics = Topics(f"jftest/{uuid.uuid4().hex[:10]}")
    topic = topics.device("gw-1", Channel.REPORTED)
    publisher = MqttBus(mosquitto, topics, lambda _t, _p: None, subscriptions=[])
    inbox = Inbox()
    bus = MqttBus(mosquitto, topics, inbox.put, subscriptions=[])
    leads = threading.Event()
    duty = ReportDuty(bus, [topics.every_device(Channel.REPORTED)], leads.is_set, interval_s=0.1)
    publisher.start()
    bus.start()
    try:
        publisher.publish(topic, b"first")  # retained, before anyone follows
        duty.start()
        time.sleep(0.5)
        assert inbox.copy() == [], "a replica that does not lead receives no reports"

        leads.set()  # the lease is taken
        poll(lambda: inbox.copy() == [b"first"], 10, "the retained report on taking the lease")
        publisher.publish(topic, b"second")
        poll(lambda: inbox.copy() == [b"first", b"second"], 10, "a new report while leading")

        leads.clear()  # the lease is lost
        poll(lambda: not duty.following, 10, "the duty to unsubscribe")
        publisher.publish(topic, b"third")
        time.sleep(0.5)
        assert inbox.copy() == [b"first", b"second"], "no report after the lease was lost"

        leads.set()  # taken again: the latest report, sent while not following, arrives
        poll(lambda: inbox.copy()[-1:] == [b"third"], 10, "the report sent meanwhile")
    finally:
        duty.stop()
        bus.stop()
        publisher.publish(topic, b"")  # an empty retained message clears the broker's copy
        publisher.stop()
