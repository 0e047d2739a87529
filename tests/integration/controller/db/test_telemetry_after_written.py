"""``IngestBatcher.after_written``: the ingest link acknowledges a read to the broker
only from this callback, so it must come after the read's messages are in the database, in the
order the reads came, and also for a read the database refuses for good (else the broker would
send a poison message for ever). Real SQLite and PostgreSQL stores."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Engine

from controller.db.telemetry_store import TelemetryStore, WriteResult
from controller.ingest.batch import IngestBatcher
from shared.messages import Event
from shared.telemetry import Telemetry
from tests.integration.controller.db.test_telemetry_writer_faults import refused_by_postgres
from tests.integration.health.samples import sample


class HeldStore(TelemetryStore):
    """The real store, whose writes wait until the test opens ``gate``."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.gate = threading.Event()
        self.writing = threading.Event()

    def write_batch(
        self, samples: Sequence[Telemetry], events: Sequence[Event], now: datetime
    ) -> WriteResult:
        self.writing.set()
        assert self.gate.wait(30), "the test never opened the gate"
        return super().write_batch(samples, events, now)


def test_done_comes_only_once_the_messages_before_it_are_stored(engine: Engine) -> None:
    store = HeldStore(engine)
    batcher = IngestBatcher(store, max_batch=100, linger_s=0.01)
    seen: list[int] = []
    done = threading.Event()

    def acknowledge() -> None:
        seen.append(store.counts()["samples"])
        done.set()

    batcher.start()
    try:
        for n in range(10):
            batcher.submit(sample("gw-1", n))
        batcher.after_written(acknowledge)
        assert store.writing.wait(10)
        assert not done.wait(0.5), "acknowledged while the write was still waiting"
        store.gate.set()
        assert done.wait(30)
    finally:
        store.gate.set()
        batcher.stop()
    assert seen == [10], "when done is called, all ten samples are in the database"


def test_done_markers_come_in_the_order_of_their_reads(engine: Engine) -> None:
    batcher = IngestBatcher(TelemetryStore(engine), max_batch=7, linger_s=0.0)
    order: list[int] = []
    batcher.start()
    try:
        for read in range(20):
            for n in range(3):
                batcher.submit(sample("gw-1", read * 3 + n))
            batcher.after_written(lambda read=read: order.append(read))  # type: ignore[misc]
        batcher.after_written(lambda: order.append(-1))  # a read of nothing to store
        assert batcher.drain(30)
    finally:
        batcher.stop()
    assert order == [*range(20), -1]


def test_done_comes_for_a_read_the_database_refuses_and_the_refusal_is_counted(
    pg_engine: Engine,
) -> None:
    batcher = IngestBatcher(TelemetryStore(pg_engine), max_batch=100, linger_s=0.05)
    done = threading.Event()
    batcher.start()
    try:
        batcher.submit(sample("gw-1", 0))
        batcher.submit(refused_by_postgres("gw-1", 1))
        batcher.after_written(done.set)
        assert done.wait(60), "a refused message must still be acknowledged once given up"
    finally:
        batcher.stop()
    stats = batcher.stats()
    assert (stats.samples_persisted, stats.dropped) == (1, 1)
