"""One ingest worker process: telemetry from a shared MQTT subscription → its own database writer.

Spawned by :mod:`controller.ingest.pool` (``jetfleet serve --ingest-workers N``). Each worker has
its own MQTT connection in the ``$share/jetfleet-ingest/...`` group, so the broker hands every
telemetry message to exactly one worker; its own batcher and SQLAlchemy engine (made here, after
the spawn). The connection is the lean :class:`IngestLink`, not paho: it reads many messages per
``recv`` and acknowledges them in one write, and the messages of each read are decoded and
queued for the batch writer on the link's thread (two threads per worker: link, writer). Only
telemetry comes here: reported state, status and events stay with the main process, which
drives deploys, jobs and rollout gates from them. Each worker applies its share of the
per-device sample bounds (:mod:`controller.ingest.sample_guard`: the bound divided by N, as the
broker spreads a device's telemetry over the workers).

The worker reports to the main process over its end of a pipe: ``("ready", pid)`` once the broker
granted the subscription, ``("error", line)`` when it cannot start, and ``("report",
WorkerReport)`` with its counters (deltas) about four times a second while they move and at
least once a second as a heartbeat. SIGTERM stops it: it unsubscribes by disconnecting, writes
what it queued, sends a last report and exits. It ignores SIGINT (Ctrl-C reaches the whole
process group; the main process decides) and exits when the main process is gone.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from typing import NoReturn

from controller.broker_admin.acl import ingest_share_filter
from controller.db.repository import Repository
from controller.db.session import make_engine
from controller.db.telemetry_store import Retention, TelemetryStore
from controller.errors import ControllerError
from controller.ingest.batch import IngestBatcher
from controller.ingest.batch_stats import BatchCounts, BatchStats
from controller.ingest.gc_tuning import tune_garbage_collector
from controller.ingest.handlers import Ingest
from controller.ingest.link import IngestLink
from controller.ingest.sample_guard import GuardCounts, GuardLimits
from controller.records import IngestCounts
from shared.topics import Topics
from shared.transport import MqttAuth

logger = logging.getLogger(__name__)

REPORT_EVERY_S = 0.25
HEARTBEAT_EVERY_S = 1.0


@dataclass(frozen=True)
class WorkerConfig:
    """Everything a worker needs, picklable for the spawn."""

    index: int
    db_url: str
    broker_url: str
    auth: MqttAuth
    topic_prefix: str
    max_payload_bytes: int
    retention: Retention
    log_level: int = logging.INFO
    replica_id: str = "controller"
    """Names the worker's persistent MQTT session with ``index``: stable across restarts."""
    session_expiry_s: int = 0
    guard: GuardLimits = field(default_factory=GuardLimits)
    """This worker's share of the per-device sample bounds (:meth:`GuardLimits.per_worker`)."""


@dataclass(frozen=True)
class WorkerReport:
    """Counters of one worker since its previous report, and its queue now."""

    accepted: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    last_rejection: str | None = None
    batch: BatchCounts = field(default_factory=BatchCounts)
    queued: int = 0
    capacity: int = 0
    guard: GuardCounts = field(default_factory=GuardCounts)
    """Samples the worker's sample guard re-dated or refused (deltas)."""

    @property
    def moved(self) -> bool:
        """Whether any counter changed (a report worth sending before the heartbeat is due)."""
        return bool(
            self.accepted
            or self.rejected
            or self.batch != BatchCounts()
            or self.guard != GuardCounts()
        )


class _Reporter:
    """Turns cumulative counters into the deltas the main process adds up."""

    def __init__(self, ingest: Ingest, batcher: IngestBatcher) -> None:
        self._ingest = ingest
        self._batcher = batcher
        self._last_ingest = ingest.stats()
        self._last_batch = batcher.stats()
        self._last_guard = ingest.guard_stats()

    def next(self) -> WorkerReport:
        now_ingest, now_batch = self._ingest.stats(), self._batcher.stats()
        now_guard = self._ingest.guard_stats()
        report = _delta(self._last_ingest, now_ingest, self._last_batch, now_batch)
        report = replace(report, guard=now_guard - self._last_guard)
        self._last_ingest, self._last_batch = now_ingest, now_batch
        self._last_guard = now_guard
        return report


def _delta(
    before: IngestCounts, after: IngestCounts, batch_before: BatchStats, batch_after: BatchStats
) -> WorkerReport:
    rejected = Counter(after.rejected_by_channel)
    rejected.subtract(before.rejected_by_channel)
    return WorkerReport(
        accepted=after.accepted - before.accepted,
        rejected={channel: n for channel, n in rejected.items() if n},
        last_rejection=(
            after.last_rejection if after.last_rejection != before.last_rejection else None
        ),
        batch=BatchCounts.between(batch_before, batch_after),
        queued=batch_after.queued,
        capacity=batch_after.capacity,
    )


class _Worker:
    """The parts of one worker process, started and stopped in order."""

    def __init__(self, config: WorkerConfig) -> None:
        topics = Topics(config.topic_prefix)
        self.engine = make_engine(config.db_url)
        self.batcher = IngestBatcher(TelemetryStore(self.engine), retention=config.retention)
        self.ingest = Ingest(
            Repository(self.engine),
            topics,
            batcher=self.batcher,
            max_payload_bytes=config.max_payload_bytes,
            guard=config.guard,
        )
        self.link = IngestLink(
            config.broker_url,
            [ingest_share_filter(config.topic_prefix)],
            self.ingest.handle_batch,
            auth=config.auth,
            client_id=f"jetfleet-ingest-{config.replica_id}-{config.index}",
            session_expiry_s=config.session_expiry_s,
        )

    def start(self) -> None:
        self.batcher.start()
        self.link.start()

    def stop(self) -> None:
        self.link.stop()
        self.batcher.stop()
        self.engine.dispose()


def worker_main(config: WorkerConfig, conn: Connection) -> None:
    """Entry point of the spawned process: run until SIGTERM or until the parent is gone."""
    stop = threading.Event()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    logging.basicConfig(
        level=config.log_level,
        format=f"%(asctime)s %(levelname)s %(name)s[ingest-{config.index}]: %(message)s",
    )
    parent = os.getppid()
    try:
        worker = _Worker(config)
    except ControllerError as exc:
        _refuse(conn, str(exc))
    try:
        worker.start()
    except ControllerError as exc:
        worker.stop()
        _refuse(conn, str(exc))
    tune_garbage_collector()
    reporter = _Reporter(worker.ingest, worker.batcher)
    try:
        conn.send(("ready", os.getpid()))
        _report_until(stop, conn, reporter, parent)
    except (BrokenPipeError, EOFError, OSError):
        stop.set()  # the main process is gone: nobody to report to
    finally:
        worker.stop()
        try:
            conn.send(("report", reporter.next()))
            conn.send(("stopped", os.getpid()))
        except (BrokenPipeError, OSError):
            pass
        conn.close()


def _refuse(conn: Connection, line: str) -> NoReturn:
    conn.send(("error", line))
    conn.close()
    sys.exit(1)


def _report_until(
    stop: threading.Event, conn: Connection, reporter: _Reporter, parent: int
) -> None:
    last_sent = time.monotonic()
    while not stop.wait(REPORT_EVERY_S):
        if os.getppid() != parent:
            logger.warning("the controller process is gone; stopping")
            return
        report = reporter.next()
        if report.moved or time.monotonic() - last_sent >= HEARTBEAT_EVERY_S:
            conn.send(("report", report))
            last_sent = time.monotonic()
