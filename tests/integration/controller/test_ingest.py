"""Agent messages through the real Mosquitto land in the database (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from controller.server import Controller
from shared.codec import encode
from shared.messages import Status
from shared.topics import Channel, Topics
from tests.integration.controller.agent_messages import now, reported, telemetry
from tests.integration.controller.conftest import MqttPeer, poll


def device(api: httpx.Client, device_id: str) -> dict[str, Any] | None:
    r = api.get(f"/api/v1/devices/{device_id}")
    return r.json() if r.status_code == 200 else None


def test_reported_and_telemetry_are_stored(
    db_controller: Controller,
    db_api: httpx.Client,
    peers: Callable[[str], MqttPeer],
    prefix: str,
) -> None:
    topics = Topics(prefix)
    agent = peers(db_controller.broker_url)
    agent.publish(topics.device("gw-1", Channel.REPORTED), encode(reported("gw-1", {"site": "a"})))
    agent.publish(
        topics.device("gw-1", Channel.STATUS),
        encode(Status(device_id="gw-1", state="online", ts=now())),
    )
    agent.publish(topics.device("gw-1", Channel.TELEMETRY), encode(telemetry("gw-1", "s-1")))

    shown = poll(lambda: (d := device(db_api, "gw-1")) and d["online"] and d, what="gw-1 online")
    assert shown["labels"] == {}  # devices do not choose their labels: the operator does
    assert shown["observed_generation"] == -1
    assert shown["facts"]["simulated"] is True
    assert shown["serve_url"] == "http://127.0.0.1:9000"
    samples = poll(lambda: db_api.get("/api/v1/devices/gw-1/telemetry").json(), what="telemetry")
    assert samples[0]["sample_id"] == "s-1"
    assert samples[0]["cpu_percent"] == 12.5


def test_duplicate_telemetry_is_stored_once(
    db_controller: Controller,
    db_api: httpx.Client,
    peers: Callable[[str], MqttPeer],
    prefix: str,
) -> None:
    topic = Topics(prefix).device("gw-2", Channel.TELEMETRY)
    agent = peers(db_controller.broker_url)
    agent.publish(topic, encode(telemetry("gw-2", "dup")))
    agent.publish(topic, encode(telemetry("gw-2", "dup")))
    agent.publish(topic, encode(telemetry("gw-2", "next")))
    poll(
        lambda: db_api.get("/api/v1/ingest").json()["accepted"] >= 3, what="three messages handled"
    )
    ids = [s["sample_id"] for s in db_api.get("/api/v1/devices/gw-2/telemetry").json()]
    assert sorted(ids) == ["dup", "next"]


def test_malformed_payload_is_counted_logged_and_survived(
    controller: Controller,
    api: httpx.Client,
    peers: Callable[[str], MqttPeer],
    prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="controller.ingest.handlers")
    topics = Topics(prefix)
    agent = peers(controller.broker_url)
    bad = json.loads(encode(telemetry("gw-3", "s-1")))
    bad["cpu_percent"] = "lots"
    agent.publish(topics.device("gw-3", Channel.TELEMETRY), json.dumps(bad).encode())
    agent.publish(topics.device("gw-3", Channel.EVENTS), b"{not json")
    agent.publish(topics.device("gw-3", Channel.TELEMETRY), encode(telemetry("gw-other", "x")))

    stats = poll(
        lambda: (s := api.get("/api/v1/ingest").json())["rejected"] == 3 and s,
        what="three rejections",
    )
    assert stats["rejected_by_channel"] == {"telemetry": 2, "events": 1}
    # Telemetry has its own lane in the inbox: order holds within a channel, not across them.
    assert stats["last_rejection"].startswith(
        ("rejected telemetry from gw-3: device_id: ", "rejected events from gw-3: <payload>")
    )
    lines = [r.getMessage() for r in caplog.records if r.name == "controller.ingest.handlers"]
    assert len(lines) == 3
    telemetry_lines = [line for line in lines if line.startswith("rejected telemetry")]
    assert "rejected telemetry from gw-3: cpu_percent: " in telemetry_lines[0]
    assert telemetry_lines[1].startswith("rejected telemetry from gw-3: device_id: ")
    assert [
        line for line in lines if line.startswith("rejected events from gw-3: <payload>: not JSON")
    ]

    assert api.get("/api/v1/devices/gw-3").status_code == 404, "rejected messages store nothing"
    agent.publish(topics.device("gw-3", Channel.TELEMETRY), encode(telemetry("gw-3", "good")))
    sample = poll(
        lambda: device(api, "gw-3") and api.get("/api/v1/devices/gw-3/telemetry").json(),
        what="good sample",
    )
    assert [s["sample_id"] for s in sample] == ["good"]
