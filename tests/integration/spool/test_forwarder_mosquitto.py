"""Store-and-forward through a real Mosquitto that goes away during steady telemetry."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.link.spool import Forwarder, Spool
from tests.integration.spool.mqtt_peers import MosquittoBroker, Qos1Publisher, Subscriber

SAMPLES = 300
PERIOD_S = 0.01


def wait_until(condition: Callable[[], bool], what: str, deadline_s: float = 30.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.02)


def test_samples_produced_while_the_broker_is_down_arrive_once_in_order(
    private_broker: MosquittoBroker, tmp_path: Path
) -> None:
    subscriber = Subscriber(private_broker.port, "jetfleet/v1/gw-01/telemetry")
    assert subscriber.subscribed.wait(10), "the subscriber never got its SUBACK"
    publisher = Qos1Publisher(private_broker.port, "jetfleet/v1/gw-01")
    spool = Spool(tmp_path / "spool.sqlite3")
    forwarder = Forwarder(spool, publisher, idle_s=0.2, retry_base_s=0.05, retry_cap_s=0.5)
    produced = threading.Event()

    def produce() -> None:
        for i in range(SAMPLES):
            payload = json.dumps({"sample_id": f"gw-01:boot:{i}", "seq": i}).encode()
            spool.append("telemetry", payload, f"gw-01:boot:{i}")
            forwarder.notify()
            time.sleep(PERIOD_S)
        produced.set()

    producer = threading.Thread(target=produce, name="producer")
    forwarder.start()
    producer.start()
    try:
        wait_until(lambda: subscriber.count() >= 30, "30 samples went through")
        private_broker.stop()
        before_outage = subscriber.count()
        wait_until(lambda: len(spool) >= 50, "50 samples were spooled while the broker was down")
        assert not produced.is_set(), "the outage must happen during production"
        private_broker.start()
        wait_until(produced.is_set, "the producer finished")
        wait_until(lambda: len(set(subscriber.received)) >= SAMPLES, f"{SAMPLES} samples arrived")
        wait_until(lambda: len(spool) == 0, "the spool drained")
    finally:
        producer.join(timeout=30)
        forwarder.stop()
        publisher.close()
        subscriber.close()
        spool.close()

    seqs = [json.loads(payload)["seq"] for payload in subscriber.received]
    assert list(dict.fromkeys(seqs)) == list(range(SAMPLES))
    # QoS 1 is at-least-once on both legs: only what was in flight when the broker went down may
    # arrive twice (the controller stores it once by its key).
    in_flight = max(seqs[:before_outage], default=-1) + 1
    assert all(seq <= in_flight for seq in seqs if seqs.count(seq) > 1), seqs
    assert spool_dropped(tmp_path) == 0


def spool_dropped(tmp_path: Path) -> int:
    with Spool(tmp_path / "spool.sqlite3") as spool:
        return spool.dropped
