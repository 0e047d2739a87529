"""Oversized MQTT payloads through the real Mosquitto: the controller drops them undecoded,
counts them as rejected, logs once per device; the agent ignores an oversized desired document."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from agent.link.mqtt_link import MAX_DESIRED_BYTES
from agent.settings import AgentSettings
from controller.server import Controller
from shared.codec import encode
from shared.messages import DesiredState
from shared.topics import Channel, Topics
from tests.integration.controller.agent_messages import reported, telemetry
from tests.integration.controller.conftest import MqttPeer
from tests.integration.hardening.conftest import open_controller
from tests.integration.hardening.watcher import ReportedWatcher
from tests.integration.tls.agent_runner import RunningAgent, poll
from tests.ports import free_port

LIMIT = 4096


def padded(payload: bytes, size: int) -> bytes:
    """The same JSON document, made ``size`` bytes long with trailing whitespace (still valid)."""
    assert len(payload) < size
    return payload + b" " * (size - len(payload))


@pytest.fixture
def topics() -> Topics:
    return Topics(f"payload-{uuid.uuid4().hex[:10]}/v1")


@pytest.fixture
def controller(mosquitto: str, topics: Topics, tmp_path: Path) -> Iterator[Controller]:
    with open_controller(mosquitto, tmp_path, topics.prefix, max_mqtt_payload_bytes=LIMIT) as c:
        yield c


def test_the_controller_drops_oversized_messages_counts_them_and_logs_once_per_device(
    controller: Controller,
    mosquitto: str,
    topics: Topics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="controller.ingest.handlers")
    peer = MqttPeer(mosquitto).connect()
    api = httpx.Client(base_url=controller.http_url, timeout=10)
    try:
        big_state = padded(encode(reported("gw-big", {"site": "lab"})), LIMIT + 1)
        for _ in range(3):
            peer.publish(topics.device("gw-big", Channel.REPORTED), big_state)
        # Telemetry comes in over its own connection (the ingest link), reported state over the
        # bus: wait for the three reports before sending the sample, so the order is known.
        poll(lambda: api.get("/api/v1/ingest").json()["rejected"] == 3, "three rejections")
        big_sample = padded(encode(telemetry("gw-other", "s-1")), LIMIT * 10)
        peer.publish(topics.device("gw-other", Channel.TELEMETRY), big_sample)

        stats = poll(
            lambda: (s := api.get("/api/v1/ingest").json())["rejected"] == 4 and s,
            "four rejections",
        )
        assert stats["rejected_by_channel"] == {"reported": 3, "telemetry": 1}
        assert stats["last_rejection"] == (
            f"rejected telemetry from gw-other: <payload>: {LIMIT * 10} bytes, "
            f"over the {LIMIT}-byte limit"
        )
        assert api.get("/api/v1/devices/gw-big").status_code == 404
        lines = [r.getMessage() for r in caplog.records if r.name == "controller.ingest.handlers"]
        assert [line.split(":")[0] for line in lines] == [
            "rejected reported from gw-big",
            "rejected telemetry from gw-other",
        ]

        peer.publish(
            topics.device("gw-big", Channel.REPORTED), encode(reported("gw-big", {"site": "lab"}))
        )
        poll(
            lambda: api.get("/api/v1/devices/gw-big").status_code == 200,
            "gw-big known after a message of normal size",
        )
    finally:
        api.close()
        for channel in (Channel.REPORTED,):
            peer.publish(topics.device("gw-big", channel), b"", retain=True)
        peer.close()


def test_the_agent_ignores_an_oversized_desired_document_and_applies_the_next_one(
    mosquitto: str, topics: Topics, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="agent.link.mqtt_link")
    device = f"gw-limit-{uuid.uuid4().hex[:6]}"
    watcher = ReportedWatcher(mosquitto, topics, device)
    desired_topic = topics.device(device, Channel.DESIRED)
    agent = RunningAgent(
        AgentSettings(
            device_id=device,
            broker_url=mosquitto,
            state_dir=tmp_path / "agent",
            serve_address=f"127.0.0.1:{free_port()}",
            topic_prefix=topics.prefix,
            runtime="onnxruntime",
        )
    )
    try:
        poll(lambda: watcher.observed() == -1, "the agent's first reported state")
        document = DesiredState(
            device_id=device, generation=7, issued_at=datetime.now(timezone.utc), slots=()
        )
        watcher.publish(desired_topic, padded(encode(document), MAX_DESIRED_BYTES + 1))
        line = poll(
            lambda: next(
                (r.getMessage() for r in caplog.records if "ignored" in r.getMessage()), None
            ),
            "the agent's error about the oversized document",
        )
        assert f"{MAX_DESIRED_BYTES + 1} bytes, over the {MAX_DESIRED_BYTES}-byte limit" in line

        # Had generation 7 been applied, the agent would now ignore the older generation 5.
        watcher.publish(desired_topic, encode(document.model_copy(update={"generation": 5})))
        poll(lambda: watcher.observed() == 5, "generation 5 applied")
    finally:
        agent.stop()
        watcher.publish(desired_topic, b"")
        watcher.publish(topics.device(device, Channel.REPORTED), b"")
        watcher.publish(topics.device(device, Channel.STATUS), b"")
        watcher.close()
