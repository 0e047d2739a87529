"""The agent's telemetry through a Mosquitto that goes away: spooled, then delivered in order."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.daemon import AgentDaemon
from agent.hardware.facts import probe_facts
from agent.link.spool import SPOOL_FILE
from agent.settings import AgentSettings
from tests.integration.spool.mqtt_peers import MosquittoBroker, Subscriber
from tests.ports import free_port

DEVICE = "gw-outage"


def wait_until(condition: Callable[[], bool], what: str, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.05)


def spooled(state_dir: Path) -> int:
    """Messages waiting in the agent's spool, read without taking a write lock."""
    path = state_dir / SPOOL_FILE
    if not path.exists():
        return 0
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
        return int(
            db.execute("SELECT COUNT(*) FROM entries WHERE channel = 'telemetry'").fetchone()[0]
        )


def seq_of(payload: bytes) -> int:
    sample_id = json.loads(payload)["sample_id"]
    return int(sample_id.rsplit(":", 1)[1])


def test_telemetry_taken_while_the_broker_is_down_arrives_after_it_returns_in_order(
    private_broker: MosquittoBroker, tmp_path: Path
) -> None:
    prefix = f"outage-{uuid.uuid4().hex[:8]}/v1"
    subscriber = Subscriber(private_broker.port, f"{prefix}/{DEVICE}/telemetry")
    assert subscriber.subscribed.wait(10), "the subscriber never got its SUBACK"
    state_dir = tmp_path / "state"
    settings = AgentSettings(
        device_id=DEVICE,
        broker_url=f"mqtt://127.0.0.1:{private_broker.port}",
        state_dir=state_dir,
        serve_address=f"127.0.0.1:{free_port()}",
        topic_prefix=prefix,
        telemetry_interval_s=0.1,
    )
    daemon = AgentDaemon(settings, probe_facts())
    errors: list[BaseException] = []

    def run() -> None:
        try:
            daemon.run()
        except BaseException as exc:
            errors.append(exc)

    agent = threading.Thread(target=run, daemon=True)
    agent.start()
    try:
        wait_until(lambda: subscriber.count() >= 5, "5 samples arrived")
        private_broker.stop()
        down_at = subscriber.count()
        wait_until(lambda: spooled(state_dir) >= 20, "20 samples waited in the spool")
        assert subscriber.count() - down_at <= 1, "samples arrived while the broker was down"
        spooled_during_outage = spooled(state_dir)
        private_broker.start()
        wait_until(
            lambda: len(set(subscriber.received)) >= down_at + spooled_during_outage + 5,
            "the spooled samples and 5 more arrived",
        )
    finally:
        daemon.request_stop()
        agent.join(30)
        subscriber.close()
    assert not agent.is_alive(), "agent did not stop"
    assert errors == []

    seqs = [seq_of(p) for p in subscriber.received]
    distinct = list(dict.fromkeys(seqs))
    assert distinct == list(range(1, len(distinct) + 1)), "a sample is missing or out of order"
    assert len(distinct) >= down_at + spooled_during_outage
    # QoS 1 is at-least-once on both legs: only what was in flight when the broker went down may
    # arrive twice (the controller stores it once by sample_id).
    in_flight = max(seqs[:down_at], default=0) + 1
    assert all(seq <= in_flight for seq in seqs if seqs.count(seq) > 1), seqs

    last = json.loads(subscriber.received[-1])
    assert last["memory_available_bytes"] > 0
    assert last["disk_free_bytes"] > 0
    assert last["spool_dropped"] == 0
    assert "nvml" in last["sources_absent"] or last["gpu_memory_total_bytes"] is not None
