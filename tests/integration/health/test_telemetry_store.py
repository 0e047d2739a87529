"""Batched telemetry writes, rollups, retention and series on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import Engine

from controller.db import migrate
from controller.db.session import make_engine
from controller.db.telemetry_store import Retention, TelemetryStore
from controller.ingest.batch import IngestBatcher
from tests.integration.health.samples import event, sample

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    migrate.upgrade(db_url)
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


def test_a_replayed_batch_is_stored_once(engine: Engine) -> None:
    store = TelemetryStore(engine)
    batch = [sample("gw-1", n, at=T0 + timedelta(seconds=n)) for n in range(50)]
    first = store.write_batch(batch, [event("gw-1", 1)], T0)
    again = store.write_batch(batch[:10] + batch[:10], [event("gw-1", 1)], T0)
    assert (first.samples_inserted, first.events_inserted) == (50, 1)
    assert (again.samples_inserted, again.samples_duplicate, again.events_inserted) == (0, 20, 0)
    assert store.counts()["samples"] == 50
    latest = store.latest("gw-1")
    assert latest is not None
    assert latest["sample_id"] == "gw-1-49"
    assert latest["requests"] == 100
    assert latest["latency_p99_ms"] == 12.0
    assert latest["extra"]["power_mode"] == "15W"
    assert latest["extra"]["temperatures_c"] == {"cpu": 49.0, "gpu": 50.0}


def test_rollups_follow_the_raw_samples_and_retention_prunes(engine: Engine) -> None:
    store = TelemetryStore(engine)
    first = [sample("gw-1", n, at=T0 + timedelta(seconds=n), cpu=n) for n in range(60)]
    second = [
        sample("gw-1", 60 + n, at=T0 + timedelta(minutes=1, seconds=n), cpu=90) for n in range(30)
    ]
    result = store.write_batch(first + second, [], T0)
    assert store.refresh_rollups(result.dirty) == 2
    points = store.series("gw-1", "cpu_percent", T0, T0 + timedelta(minutes=2), 60, "avg", "rollup")
    assert points == [(T0, pytest.approx(29.5)), (T0 + timedelta(minutes=1), pytest.approx(90))]
    # A late sample of the first minute (replayed from a spool) updates its rollup.
    late = store.write_batch([sample("gw-1", 999, at=T0 + timedelta(seconds=30), cpu=100)], [], T0)
    store.refresh_rollups(late.dirty)
    points = store.series("gw-1", "requests", T0, T0 + timedelta(minutes=1), 60, "sum", "rollup")
    assert points == [(T0, 6100.0)]
    # Raw is kept 1 h here, rollups 1 day: after 2 h only the rollups answer.
    retention = Retention(raw_s=3600, rollup_s=86400)
    assert store.prune(T0 + timedelta(hours=2), retention) == (91, 0)
    assert (
        store.series("gw-1", "cpu_percent", T0, T0 + timedelta(minutes=2), 60, "max", "raw") == []
    )
    assert (
        len(store.series("gw-1", "cpu_percent", T0, T0 + timedelta(minutes=2), 60, "max", "rollup"))
        == 2
    )
    assert store.prune(T0 + timedelta(days=2), retention) == (0, 2)


def test_series_buckets_by_step_with_each_rollup(engine: Engine) -> None:
    store = TelemetryStore(engine)
    batch = [sample("gw-1", n, at=T0 + timedelta(seconds=n), cpu=n, p99=n) for n in range(20)]
    store.write_batch(batch, [], T0)
    end = T0 + timedelta(seconds=20)
    assert [v for _, v in store.series("gw-1", "cpu_percent", T0, end, 10, "max", "raw")] == [9, 19]
    assert [v for _, v in store.series("gw-1", "cpu_percent", T0, end, 10, "min", "raw")] == [0, 10]
    assert [v for _, v in store.series("gw-1", "latency_p99_ms", T0, end, 10, "last", "raw")] == [
        9,
        19,
    ]
    rps = store.series("gw-1", "throughput_rps", T0, end, 10, "avg", "raw")
    assert [v for _, v in rps] == [100.0, 100.0]
    with pytest.raises(Exception, match="use step >= "):
        store.series("gw-1", "cpu_percent", T0, T0 + timedelta(days=1), 1, "avg", "raw")
    with pytest.raises(Exception, match="unknown metric"):
        store.series("gw-1", "bogus", T0, end, 10, "avg", "raw")


def test_batcher_blocks_when_full_then_stores_everything(engine: Engine) -> None:
    store = TelemetryStore(engine)
    batcher = IngestBatcher(store, capacity=3, max_batch=2, linger_s=0.01)
    for n in range(3):
        batcher.submit(sample("gw-1", n))
    fourth = threading.Thread(target=batcher.submit, args=(sample("gw-1", 3),))
    fourth.start()
    fourth.join(0.3)
    assert fourth.is_alive(), "submit must wait while the queue is full (backpressure)"
    batcher.start()
    try:
        fourth.join(10)
        assert not fourth.is_alive()
        assert batcher.drain(10)
    finally:
        batcher.stop()
    stats = batcher.stats()
    assert stats.samples_persisted == 4
    assert stats.blocked_s > 0
    # Stopping ran the upkeep: the samples' minute (or two, across a minute edge) is rolled up.
    assert store.counts()["samples"] == 4
    assert store.counts()["rollups"] in (1, 2)
