"""Telemetry keeps flowing into the database when a write fails in an unexpected way: a psycopg
error in PostgreSQL's COPY is a DatabaseError like any other database error, and the batched writer
survives an exception it did not expect."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime, timezone

import pytest
from sqlalchemy import Engine

from controller.db.telemetry_store import TelemetryStore, WriteResult
from controller.errors import DatabaseError
from controller.ingest.batch import IngestBatcher
from shared.messages import Event
from shared.telemetry import Telemetry
from tests.integration.health.samples import sample

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


def refused_by_postgres(device_id: str, n: int) -> Telemetry:
    """A valid sample whose ``swaps`` does not fit the column (PostgreSQL ``integer``): the
    wire model allows any non-negative count, the COPY refuses it."""
    return sample(device_id, n).model_copy(update={"swaps": 2**31})


def test_a_value_postgres_refuses_in_copy_is_a_database_error(pg_engine: Engine) -> None:
    store = TelemetryStore(pg_engine)
    good = [sample("gw-1", n) for n in range(3)]

    with pytest.raises(DatabaseError, match="out of range for type integer"):
        store.write_batch([*good, refused_by_postgres("gw-1", 99)], [], NOW)

    # Nothing of the refused batch was stored, and the store still works for the next one.
    assert store.counts()["samples"] == 0
    assert store.write_batch(good, [], NOW).samples_inserted == 3


def test_a_refused_sample_is_dropped_and_counted_while_the_rest_is_stored(
    pg_engine: Engine,
) -> None:
    store = TelemetryStore(pg_engine)
    batcher = IngestBatcher(store, max_batch=100, linger_s=0.05)
    batcher.start()
    try:
        for n in range(5):
            batcher.submit(sample("gw-1", n))
        batcher.submit(refused_by_postgres("gw-1", 5))
        assert batcher.drain(60), "the writer must work through a batch the database refuses"
        for n in range(6, 10):
            batcher.submit(sample("gw-1", n))
        assert batcher.drain(30), "telemetry after the refused sample must still be written"
    finally:
        batcher.stop()
    stats = batcher.stats()
    assert stats.dropped == 1
    assert stats.samples_persisted == 9
    assert store.counts()["samples"] == 9
    latest = store.latest("gw-1")
    assert latest is not None
    assert latest["sample_id"] == "gw-1-9"


class CrashingStore(TelemetryStore):
    """The real store, except that a batch holding a sample id in ``crash_on`` raises an
    exception the batcher does not expect (a bug), ``times`` times in all."""

    def __init__(self, engine: Engine, crash_on: set[str], times: int) -> None:
        super().__init__(engine)
        self._crash_on = crash_on
        self._left = times
        self.crashed = threading.Event()

    def write_batch(
        self, samples: Sequence[Telemetry], events: Sequence[Event], now: datetime
    ) -> WriteResult:
        if self._left and any(s.sample_id in self._crash_on for s in samples):
            self._left -= 1
            self.crashed.set()
            raise RuntimeError("injected: a bug while writing telemetry")
        return super().write_batch(samples, events, now)


def test_the_writer_survives_a_crash_and_writes_the_batch_again(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    store = CrashingStore(engine, crash_on={"gw-1-0"}, times=1)
    batcher = IngestBatcher(store, max_batch=10, linger_s=0.01)
    with caplog.at_level(logging.ERROR, logger="controller.ingest.batch"):
        batcher.start()
        try:
            batcher.submit(sample("gw-1", 0))
            assert store.crashed.wait(10)
            for n in range(1, 21):
                batcher.submit(sample("gw-1", n))
            assert batcher.drain(30), "the writer must be running again after the crash"
        finally:
            batcher.stop()
    stats = batcher.stats()
    assert (stats.samples_persisted, stats.write_errors, stats.dropped) == (21, 1, 0)
    assert store.counts()["samples"] == 21
    crashes = [r for r in caplog.records if "jetfleet-ingest crashed" in r.getMessage()]
    assert len(crashes) == 1, "the crash is logged, not silent"


def test_a_batch_that_keeps_crashing_the_writer_is_given_up_message_by_message(
    pg_engine: Engine,
) -> None:
    store = CrashingStore(pg_engine, crash_on={"gw-1-2"}, times=1000)
    batcher = IngestBatcher(store, max_batch=10, linger_s=0.05)
    batcher.start()
    try:
        for n in range(5):
            batcher.submit(sample("gw-1", n))
        assert batcher.drain(60), "a batch that always crashes the writer must be given up"
        batcher.submit(sample("gw-1", 5))
        assert batcher.drain(30)
    finally:
        batcher.stop()
    stats = batcher.stats()
    # Four crashes on the batch (the retry rule), then each message alone: only gw-1-2 fails.
    assert stats.write_errors == 4
    assert stats.dropped == 1
    assert store.counts()["samples"] == 5
