"""A burst of devices reporting at once all enrol: ingest never holds up the broker's acks.

Mosquitto keeps at most 1,000 QoS 1 messages queued for a slow subscriber and drops the rest
(``max_queued_messages``). This test sends well over that faster than the database stores them.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import paho.mqtt.client as mqtt

from controller.server import Controller
from shared.codec import encode
from shared.topics import Channel, Topics
from tests.integration.controller.agent_messages import reported
from tests.integration.controller.conftest import MqttPeer, poll

DEVICES = 2500


def test_a_burst_of_reports_larger_than_the_broker_queue_all_enrols(
    controller: Controller, api: httpx.Client, peers: Callable[[str], MqttPeer], prefix: str
) -> None:
    topics = Topics(prefix)
    agent = peers(controller.broker_url)
    infos = []
    for i in range(DEVICES):
        device = f"burst-{i:04d}"
        payload = encode(reported(device, {"site": "burst"}))
        infos.append(agent.client.publish(topics.device(device, Channel.REPORTED), payload, qos=1))
    for info in infos:
        info.wait_for_publish(30)
        assert info.rc == mqtt.MQTT_ERR_SUCCESS

    def enrolled() -> bool:
        return len(api.get("/api/v1/devices").json()) == DEVICES

    poll(enrolled, timeout_s=90, what=f"{DEVICES} devices enrolled")
    assert api.get("/api/v1/ingest").json()["rejected"] == 0
