"""Issue N9, the probe against a real controller, Mosquitto and database: a gateway publishes
samples dated 2099, some dated before retention, and a burst far over any agent's rate, while
another gateway publishes its normal samples. In process (SQLite) and in two ingest worker
processes (PostgreSQL)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from controller.db.schema import EventRecord
from controller.db.session import make_engine
from controller.db.telemetry_rows import ROLLUP_ROWS, SAMPLES
from controller.db.telemetry_store import Retention
from controller.ingest.sample_guard import BURST, MAX_FUTURE_SKEW_S, RATE_PER_S, GuardCounts
from controller.server import Controller
from controller.settings import Settings
from shared.codec import encode
from shared.messages import Event
from shared.telemetry import Telemetry
from shared.topics import Channel, Topics
from tests.integration.controller.conftest import MqttPeer, api_client, poll, start_controller

EVIL, OK = "gw-evil", "gw-ok"
FUTURE = datetime(2099, 1, 1, tzinfo=timezone.utc)
STALE_N, FUTURE_N, FLOOD_N, NORMAL_N = 5, 300, 2_700, 20
ATTACK_N = STALE_N + FUTURE_N + FLOOD_N


@pytest.fixture
def prefix() -> str:
    return f"jfn9/{uuid.uuid4().hex[:10]}"


def settings(db_url: str, broker_url: str, tmp_path: Path, prefix: str, workers: int) -> Settings:
    return Settings(
        db_url=db_url,
        broker_url=broker_url,
        data_dir=tmp_path / "data",
        http_port=0,
        topic_prefix=prefix,
        auto_migrate=True,
        ingest_workers=workers,
    )


@pytest.fixture
def agent(mosquitto: str) -> Iterator[MqttPeer]:
    peer = MqttPeer(mosquitto).connect()
    yield peer
    peer.close()


@pytest.fixture
def engine_of() -> Iterator[list[Engine]]:
    made: list[Engine] = []
    yield made
    for engine in made:
        engine.dispose()


def telemetry(device_id: str, n: int, ts: datetime) -> Telemetry:
    return Telemetry(
        device_id=device_id,
        sample_id=f"{device_id}-{n}",
        ts=ts,
        interval_s=10.0,
        cpu_percent=12.5,
        memory_used_bytes=1_000,
        memory_total_bytes=8_000,
    )


def attack_and_normal(prefix: str) -> list[tuple[str, bytes]]:
    """The attacker's samples (too old, 2099, then a flood dated now) with the normal device's
    samples spread among them, in publishing order."""
    topics = Topics(prefix)
    now = datetime.now(timezone.utc)
    attack = (
        [telemetry(EVIL, n, now - timedelta(days=40)) for n in range(STALE_N)]
        + [telemetry(EVIL, STALE_N + n, FUTURE + timedelta(seconds=n)) for n in range(FUTURE_N)]
        + [telemetry(EVIL, STALE_N + FUTURE_N + n, now) for n in range(FLOOD_N)]
    )
    every = ATTACK_N // NORMAL_N
    out: list[tuple[str, bytes]] = []
    for i, message in enumerate(attack):
        out.append((topics.device(EVIL, Channel.TELEMETRY), encode(message)))
        if i % every == every - 1:
            n = i // every
            normal = telemetry(OK, n, now - timedelta(seconds=10 * (NORMAL_N - n)))
            out.append((topics.device(OK, Channel.TELEMETRY), encode(normal)))
    return out


def publish_many(peer: MqttPeer, messages: list[tuple[str, bytes]]) -> None:
    """Publish QoS 1 messages without waiting for each PUBACK in turn, then wait for all."""
    infos = [peer.client.publish(topic, payload, qos=1) for topic, payload in messages]
    for info in infos:
        info.wait_for_publish(60)
        assert info.is_published()


def rows(engine: Engine, device_id: str) -> list[tuple[datetime, dict[str, str] | None]]:
    with engine.connect() as conn:
        found = conn.execute(
            select(SAMPLES.c.ts, SAMPLES.c.extra).where(SAMPLES.c.device_id == device_id)
        ).all()
    return [(ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc), extra) for ts, extra in found]


def rollups(engine: Engine, device_id: str) -> int:
    with engine.connect() as conn:
        count = conn.execute(
            select(func.count()).where(ROLLUP_ROWS.c.device_id == device_id)
        ).scalar_one()
    return int(count)


def run_the_probe(controller: Controller, agent: MqttPeer, prefix: str, engine: Engine) -> None:
    messages = attack_and_normal(prefix)
    began = time.monotonic()
    publish_many(agent, messages)
    with api_client(controller) as api:
        stats = poll(
            lambda: (
                (s := api.get("/api/v1/ingest").json())["accepted"] + s["rejected"] == len(messages)
                and s
            ),
            120,
            "every message stored or refused",
        )
        metrics = api.get("/metrics").text
    took = time.monotonic() - began
    services = controller.services
    assert services is not None
    assert services.telemetry is not None
    assert services.batcher is not None

    # The other gateway's normal samples, published during the attack, are all stored.
    assert len(rows(engine, OK)) == NORMAL_N

    # The attack: bounded, nothing dated in the future beyond the skew, nothing past retention.
    evil = rows(engine, EVIL)
    bound = BURST + RATE_PER_S * took + 2
    assert len(evil) <= bound, f"{len(evil)} of {ATTACK_N} stored in {took:.1f} s (bound {bound})"
    latest_allowed = datetime.now(timezone.utc) + timedelta(seconds=MAX_FUTURE_SKEW_S)
    assert max(ts for ts, _ in evil) <= latest_allowed
    keep = Retention()
    oldest_allowed = datetime.now(timezone.utc) - timedelta(seconds=keep.rollup_s + 60)
    assert min(ts for ts, _ in evil) >= oldest_allowed
    flagged = [extra["device_ts"] for _, extra in evil if extra and "device_ts" in extra]
    assert len(flagged) == FUTURE_N, "each 2099 sample is stored at its receive time, flagged"
    assert all(d.startswith("2099-01-01T") for d in flagged)

    # Counted: refusals are rejected telemetry, all three outcomes by kind.
    refused = ATTACK_N - len(evil)
    assert stats["rejected_by_channel"] == {"telemetry": refused}
    assert stats["last_rejection"].startswith(f"rejected telemetry from {EVIL}: ")
    # (a worker reports them with its rejections, before the accepted count of the same samples)
    assert services.ingest.guard_stats() == GuardCounts(
        redated=FUTURE_N, stale=STALE_N, over_rate=refused - STALE_N
    )
    assert f'jetfleet_ingest_samples_guarded_total{{reason="redated"}} {FUTURE_N}' in metrics
    assert f'jetfleet_ingest_samples_guarded_total{{reason="stale"}} {STALE_N}' in metrics

    # Retention (upkeep's prune, run as the batch writer runs it, at a later time) leaves
    # nothing of the attack once the raw retention has passed; rollups likewise.
    services.batcher.upkeep_now()
    later = datetime.now(timezone.utc) + timedelta(seconds=keep.raw_s + MAX_FUTURE_SKEW_S + 60)
    services.telemetry.prune(later, keep)
    assert rows(engine, EVIL) == []
    much_later = later + timedelta(seconds=keep.rollup_s)
    services.telemetry.prune(much_later, keep)
    assert rollups(engine, EVIL) == 0


def test_the_probe_in_process(
    mosquitto: str,
    sqlite_url: str,
    tmp_path: Path,
    prefix: str,
    agent: MqttPeer,
    engine_of: list[Engine],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="controller.ingest.handlers")
    controller = start_controller(settings(sqlite_url, mosquitto, tmp_path, prefix, workers=0))
    try:
        engine = make_engine(sqlite_url)
        engine_of.append(engine)
        run_the_probe(controller, agent, prefix, engine)
    finally:
        controller.stop()
    lines = [r.getMessage() for r in caplog.records if f"telemetry from {EVIL}:" in r.getMessage()]
    assert 1 <= len(lines) <= 3, lines  # one a minute at most: the probe takes seconds
    assert not [r for r in caplog.records if f"telemetry from {OK}" in r.getMessage()]


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_the_probe_against_two_ingest_workers(
    mosquitto: str,
    db_url: str,
    tmp_path: Path,
    prefix: str,
    agent: MqttPeer,
    engine_of: list[Engine],
) -> None:
    controller = start_controller(settings(db_url, mosquitto, tmp_path, prefix, workers=2))
    try:
        assert controller.ingest_workers is not None
        engine = make_engine(db_url)
        engine_of.append(engine)
        run_the_probe(controller, agent, prefix, engine)
    finally:
        controller.stop()


def event(device_id: str, n: int, ts: datetime) -> Event:
    return Event(device_id=device_id, event_id=f"e-{n}", ts=ts, kind="build_started", slot="m")


def test_events_pass_the_same_rules_and_are_pruned_with_the_rollups(
    mosquitto: str, sqlite_url: str, tmp_path: Path, prefix: str, agent: MqttPeer
) -> None:
    """The guard's helper found the same hole in the events channel: no rate, no time check,
    and events were never pruned. Events share the device's bucket with its samples."""
    topics = Topics(prefix)
    now = datetime.now(timezone.utc)
    attack = [event(EVIL, n, FUTURE) for n in range(FUTURE_N)]
    attack += [event(EVIL, FUTURE_N + n, now) for n in range(FLOOD_N)]
    controller = start_controller(settings(sqlite_url, mosquitto, tmp_path, prefix, workers=0))
    engine = make_engine(sqlite_url)
    try:
        began = time.monotonic()
        publish_many(agent, [(topics.device(EVIL, Channel.EVENTS), encode(e)) for e in attack])
        with api_client(controller) as api:
            poll(
                lambda: (
                    (s := api.get("/api/v1/ingest").json())["accepted"] + s["rejected"]
                    == len(attack)
                ),
                120,
                "every event stored or refused",
            )
            stored = api.get(f"/api/v1/devices/{EVIL}/events", params={"limit": 10_000}).json()
        took = time.monotonic() - began
        assert len(stored) <= BURST + RATE_PER_S * took + 2
        latest_allowed = datetime.now(timezone.utc) + timedelta(seconds=MAX_FUTURE_SKEW_S)
        assert max(datetime.fromisoformat(e["ts"]) for e in stored) <= latest_allowed
        services = controller.services
        assert services is not None
        assert services.telemetry is not None
        keep = Retention()
        services.telemetry.prune(now + timedelta(seconds=keep.rollup_s + 3600), keep)
        with engine.connect() as conn:
            left = conn.execute(select(func.count()).select_from(EventRecord)).scalar_one()
        assert left == 0
    finally:
        controller.stop()
        engine.dispose()
