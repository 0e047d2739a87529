"""Simulated agents → Mosquitto → controller: fleet summary, health reasons, series, /metrics."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx

from controller.server import Controller
from shared.codec import encode
from shared.messages import Status
from shared.topics import Channel, Topics
from tests.integration.controller.agent_messages import reported
from tests.integration.controller.conftest import MqttPeer, poll, set_labels
from tests.integration.health.samples import event, sample


def publish_fleet(controller: Controller, peers: Callable[[str], MqttPeer], prefix: str) -> None:
    """gw-ok: calm; gw-hot: 95 °C and failing requests; both online with 30 samples."""
    topics = Topics(prefix)
    agent = peers(controller.broker_url)
    start = datetime.now(timezone.utc) - timedelta(seconds=30)
    for device_id, labels in (("gw-ok", {"site": "a"}), ("gw-hot", {"site": "b"})):
        agent.publish(
            topics.device(device_id, Channel.REPORTED), encode(reported(device_id, labels))
        )
        agent.publish(
            topics.device(device_id, Channel.STATUS),
            encode(Status(device_id=device_id, state="online", ts=start)),
        )
        hot = device_id == "gw-hot"
        for n in range(30):
            msg = sample(
                device_id,
                n,
                at=start + timedelta(seconds=n),
                temperature=95.0 if hot else 55.0,
                errors=30 if hot else 0,
            )
            agent.publish(topics.device(device_id, Channel.TELEMETRY), encode(msg))
            if n == 0:  # spool replay: the same sample again must not count twice
                agent.publish(topics.device(device_id, Channel.TELEMETRY), encode(msg))
        agent.publish(topics.device(device_id, Channel.EVENTS), encode(event(device_id, 1)))


def wait_until_stored(api: httpx.Client) -> None:
    """Until both devices' 30 samples are in the database: messages counted as accepted may still
    be in the batch writer's queue, so a count of accepted messages is no such wait."""

    def stored(device_id: str) -> int:
        answer = api.get(f"/api/v1/devices/{device_id}/telemetry", params={"limit": 100})
        return len(answer.json()) if answer.status_code == 200 else 0

    poll(lambda: stored("gw-ok") == stored("gw-hot") == 30, what="30 samples of each device stored")


def test_fleet_summary_health_series_and_metrics(
    db_controller: Controller,
    db_api: httpx.Client,
    peers: Callable[[str], MqttPeer],
    prefix: str,
    promtool: Callable[[str], str],
) -> None:
    publish_fleet(db_controller, peers, prefix)
    wait_until_stored(db_api)
    set_labels(db_api, "gw-ok", {"site": "a"})
    set_labels(db_api, "gw-hot", {"site": "b"})

    summary = db_api.get("/api/v1/fleet/summary").json()
    assert summary["counts"] == {"healthy": 1, "degraded": 1, "offline": 0}
    hot = next(d for d in summary["devices"] if d["id"] == "gw-hot")
    assert hot["health"] == "degraded"
    assert hot["reasons"] == [
        "error rate 30.0% (900/3000 requests) above 5.0%",
        "temperature 95.0 °C above 85 °C",
    ]
    only_a = db_api.get("/api/v1/fleet/summary", params={"label": "site=a"}).json()
    assert [d["id"] for d in only_a["devices"]] == ["gw-ok"]

    series = db_api.get(
        "/api/v1/devices/gw-ok/series",
        params={"metric": "throughput_rps", "window_s": 120, "step": 10},
    ).json()
    assert series["source"] == "raw"
    assert series["points"], series
    assert all(v == 100.0 for _, v in series["points"])
    bad = db_api.get("/api/v1/devices/gw-ok/series", params={"metric": "nope"})
    assert bad.status_code == 400
    assert "unknown metric 'nope'" in bad.json()["detail"]

    metrics = db_api.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = metrics.text
    assert 'jetfleet_devices{health="degraded"} 1' in text
    assert 'jetfleet_device_temperature_celsius{device="gw-hot"} 95' in text
    assert "jetfleet_ingest_samples_persisted_total 60" in text
    assert "jetfleet_ingest_samples_duplicate_total 2" in text
    assert "# TYPE jetfleet_ingest_rejected_total counter" in text
    assert 'jetfleet_device_latency_p99_seconds{device="gw-ok"}' in text
    assert promtool(text) == ""  # Prometheus's own lint: base units, names, types
    grafana = (Path(__file__).parents[3] / "packaging/grafana/jetfleet.json").read_text()
    for name in set(re.findall(r"jetfleet_[a-z0-9_]+", grafana)) - {"jetfleet_fleet"}:
        assert f"# TYPE {name} " in text, f"the Grafana dashboard queries {name}, not exported"


def test_disconnected_agent_shows_offline_with_reason(
    controller: Controller, api: httpx.Client, peers: Callable[[str], MqttPeer], prefix: str
) -> None:
    topics = Topics(prefix)
    agent = peers(controller.broker_url)
    agent.publish(topics.device("gw-x", Channel.REPORTED), encode(reported("gw-x", {})))
    agent.publish(
        topics.device("gw-x", Channel.STATUS), encode(Status(device_id="gw-x", state="offline"))
    )
    row = poll(
        lambda: (
            (r := api.get("/api/v1/devices/gw-x/health")).status_code == 200
            and r.json()["health"] == "offline"
            and r.json()
        ),
        what="gw-x offline",
    )
    assert row["reasons"] == ["reported offline (agent disconnected)"]
