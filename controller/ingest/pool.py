"""Telemetry ingest in worker processes (``jetfleet serve --ingest-workers N``), supervised here.

Why processes: in one Python process, receiving (:class:`IngestLink`), pydantic decoding and
the batch writer take turns on one GIL, beside the HTTP API and the state lane. With N workers
(:mod:`controller.ingest.worker`) the broker splits telemetry over N links through the shared
subscription ``$share/jetfleet-ingest/<prefix>/+/telemetry``; everything else stays here.
Without workers, the main process receives telemetry over its own link (:func:`telemetry_link`).
Its paho client never subscribes to telemetry (:func:`main_subscriptions`).

This module spawns the workers (``spawn``: no fork of a process that holds threads, sockets and
database connections), waits until each has its subscription granted, and runs one thread that
reads their reports into the main :class:`Ingest` and :class:`IngestBatcher` counters (so
``GET /api/v1/ingest`` and ``/metrics`` count everything, the sample guard's counts too) and
restarts a worker that dies, after a back-off when it keeps dying. Each worker has its own
pipe, so a killed worker cannot leave a shared lock held. ``stop`` sends SIGTERM, waits for each
worker to write what it queued, and kills what is still running after the timeout: no process
outlives the controller.

Each worker keeps a persistent MQTT session named after the replica and its index
(``jetfleet-ingest-<replica id>-<i>``) and acknowledges a message only once it is stored: a
worker that dies, or a controller killed with its workers, loses nothing the broker accepted; the
broker delivers the dead session's unacknowledged and queued messages to the worker that
connects with its name again (the restarted one), and a sample delivered twice is stored once
because (device_id, sample_id) is unique in the database whichever worker writes it. Lowering
``--ingest-workers`` leaves the sessions of the workers no longer started on the broker until
they expire (``JETFLEET_INGEST_SESSION_EXPIRY_S``): the share of telemetry the broker hands them
meanwhile is lost, so lower it with the controller stopped for less than a few seconds, or
accept that window.

The embedded broker (amqtt) has no shared subscriptions: ``--ingest-workers`` with it is refused
at start.

The supervising thread itself runs under :class:`shared.supervision.Supervised` (``restart``):
before, an exception in it (a report the counters refused, a spawn that failed) ended it without
a word, and from then on no dead worker was started again and no report was read. Its state is
in the worker slots, so a restarted thread carries on where the crashed one stopped.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from controller.broker_admin.acl import ingest_share_filter
from controller.errors import ControllerError, InvalidInput
from controller.ingest.batch import IngestBatcher
from controller.ingest.handlers import Ingest
from controller.ingest.link import IngestLink
from controller.ingest.worker import WorkerConfig, WorkerReport, worker_main
from controller.settings import Settings
from shared.supervision import Supervised
from shared.topics import AGENT_PUBLISHES, Channel, Topics
from shared.transport import MqttAuth

logger = logging.getLogger(__name__)

_SPAWN = multiprocessing.get_context("spawn")
STEADY_S = 30.0
"""A worker that ran this long before dying is restarted at once; sooner, after a back-off."""
MAX_BACKOFF_S = 30.0


def main_subscriptions(topics: Topics, *, reported: bool = True) -> list[str]:
    """What the main process's paho client subscribes to: every agent channel but telemetry
    (and but reported state with ``reported=False``).

    Telemetry, the bulk of the traffic, arrives over an :class:`IngestLink`: in the worker
    processes with ``--ingest-workers``, else in this process (:func:`telemetry_link`). Among
    replicas, reported state is followed by the rollout leader only
    (:mod:`controller.ingest.report_duty`, :func:`reports_follow_the_lease`).
    """
    skip = {Channel.TELEMETRY} | (set() if reported else {Channel.REPORTED})
    return [topics.every_device(channel) for channel in AGENT_PUBLISHES if channel not in skip]


def reports_follow_the_lease(settings: Settings) -> bool:
    """Whether reported state is stored by the rollout leader alone: replicas (``--replica-id``)
    on an external broker. A single controller, or one with the embedded broker, stores it
    itself, as it always did."""
    return settings.broker_url is not None and settings.replica_id is not None


def telemetry_link(
    topics: Topics, broker_url: str, auth: MqttAuth, ingest: Ingest, settings: Settings
) -> IngestLink:
    """Telemetry of every device into ``ingest`` in this process (no ingest workers).

    On an external broker the link keeps a persistent session named after the replica
    (``jetfleet-telemetry-<replica id>``), so what agents send while this process is down waits
    on the broker for it. With ``--replica-id`` set, the link joins the shared subscription the
    other replicas (and their ingest workers) are in, and each message goes to one of them; the
    embedded broker (amqtt, in this process, MQTT 3.1.1 without shared subscriptions) gets a
    plain clean subscription, as it lives and dies with this process anyway.
    """
    external = settings.broker_url is not None
    shared = external and settings.replica_id is not None
    return IngestLink(
        broker_url,
        [ingest_share_filter(settings.topic_prefix)]
        if shared
        else [topics.every_device(Channel.TELEMETRY)],
        ingest.handle_batch,
        auth=auth,
        client_id=f"jetfleet-telemetry-{settings.resolved_replica_id()}",
        session_expiry_s=settings.ingest_session_expiry_s if external else 0,
        protocol=5 if external else 4,
    )


def start_ingest_workers(
    settings: Settings, broker_url: str, auth: MqttAuth, ingest: Ingest, batcher: IngestBatcher
) -> IngestWorkers | None:
    """Start ``settings.ingest_workers`` workers (None when 0: ingest stays in this process)."""
    count = settings.ingest_workers
    if count <= 0:
        return None
    if settings.broker_url is None:
        raise InvalidInput(
            "--ingest-workers needs an external Mosquitto (--broker mqtt://HOST:PORT): the "
            "embedded broker has no shared subscriptions"
        )
    configs = [
        WorkerConfig(
            index=i,
            db_url=settings.db_url,
            broker_url=broker_url,
            auth=auth,
            topic_prefix=settings.topic_prefix,
            max_payload_bytes=settings.max_mqtt_payload_bytes,
            retention=batcher.retention,
            log_level=logging.getLogger().getEffectiveLevel(),
            replica_id=settings.resolved_replica_id(),
            session_expiry_s=settings.ingest_session_expiry_s,
            guard=ingest.guard_limits.per_worker(count),
        )
        for i in range(count)
    ]
    workers = IngestWorkers(configs, ingest, batcher)
    workers.start()
    return workers


@dataclass
class _Slot:
    """One worker position: its current process (None between a death and the restart)."""

    config: WorkerConfig
    process: BaseProcess | None = None
    conn: Connection | None = None
    pid: int | None = None
    ready: bool = False
    started_at: float = 0.0
    failures: int = 0
    restart_at: float | None = None


class IngestWorkers:
    """``start``/``stop`` N worker processes; ``pids`` of those ready; ``restarts`` so far."""

    def __init__(
        self,
        configs: list[WorkerConfig],
        ingest: Ingest,
        batcher: IngestBatcher,
        start_timeout_s: float = 60.0,
    ) -> None:
        self._slots = [_Slot(config) for config in configs]
        self._ingest = ingest
        self._batcher = batcher
        self._start_timeout = start_timeout_s
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._guard: Supervised | None = None
        self._restarts = 0

    @property
    def restarts(self) -> int:
        """How many times a dead worker was started again."""
        with self._lock:
            return self._restarts

    def pids(self) -> list[int]:
        """Process ids of the workers whose subscription is in place now."""
        with self._lock:
            return [s.pid for s in self._slots if s.ready and s.pid is not None]

    def start(self) -> None:
        """Spawn every worker and wait until each is subscribed; ControllerError if one is not."""
        for slot in self._slots:
            self._spawn(slot)
        deadline = time.monotonic() + self._start_timeout
        try:
            while not all(slot.ready for slot in self._slots):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ControllerError(
                        f"the ingest workers did not subscribe within {self._start_timeout:.0f} s:"
                        " check the broker, or start without --ingest-workers"
                    )
                self._poll(min(left, 0.5), during_start=True)
        except BaseException:
            self._stopping.set()
            self._end_all(10.0)
            raise
        self._guard = Supervised(
            "jetfleet-ingest-workers", self._supervise, policy="restart", stop=self._stopping
        ).start()
        logger.info("%d ingest worker processes subscribed", len(self._slots))

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM every worker, wait for it to write what it holds, kill what remains."""
        self._stopping.set()
        if self._guard is not None:
            self._guard.join(timeout_s + 15.0)
            self._guard = None
        self._end_all(timeout_s)

    # --- supervision -------------------------------------------------------------------------

    def _spawn(self, slot: _Slot) -> None:
        reader, writer = _SPAWN.Pipe(duplex=False)
        process = _SPAWN.Process(
            target=worker_main,
            args=(slot.config, writer),
            name=f"jetfleet-ingest-{slot.config.index}",
            daemon=True,
        )
        process.start()
        writer.close()
        with self._lock:
            slot.process, slot.conn, slot.pid, slot.ready = process, reader, process.pid, False
            slot.started_at = time.monotonic()
            slot.restart_at = None

    def _supervise(self) -> None:
        while not self._stopping.is_set():
            self._poll(0.5, during_start=False)
            self._restart_due()
        # Stopping: keep reading reports while the workers write what they hold and exit.
        for slot in self._slots:
            if slot.process is not None:
                slot.process.terminate()
        deadline = time.monotonic() + 30.0
        while any(s.process is not None for s in self._slots) and time.monotonic() < deadline:
            self._poll(0.5, during_start=False)

    def _poll(self, timeout_s: float, *, during_start: bool) -> None:
        """Read what the workers sent and notice the ones that died."""
        waitables: list[Connection | int] = []
        for slot in self._slots:
            if slot.conn is not None:
                waitables.append(slot.conn)
            if slot.process is not None:
                waitables.append(slot.process.sentinel)
        if not waitables:
            time.sleep(timeout_s)
            return
        ready = wait(waitables, timeout_s)
        for slot in self._slots:
            if slot.conn is not None and slot.conn in ready:
                self._read(slot, during_start=during_start)
        for slot in self._slots:
            process = slot.process
            if process is not None and (process.sentinel in ready or not process.is_alive()):
                self._reap(slot, during_start=during_start)

    def _read(self, slot: _Slot, *, during_start: bool) -> None:
        conn = slot.conn
        assert conn is not None
        try:
            while conn.poll():
                self._handle(slot, conn.recv(), during_start=during_start)
        except (EOFError, OSError):
            conn.close()
            slot.conn = None

    def _handle(self, slot: _Slot, message: tuple[object, ...], *, during_start: bool) -> None:
        kind, body = message[0], message[1]
        index = slot.config.index
        if kind == "report" and isinstance(body, WorkerReport):
            self._ingest.absorb(body.accepted, body.rejected, body.last_rejection, body.guard)
            self._batcher.absorb(body.batch)
            self._batcher.remote_queue(index, body.queued, body.capacity)
        elif kind == "ready":
            with self._lock:
                slot.ready = True
            logger.info("ingest worker %d subscribed (pid %s)", index, body)
        elif kind == "error":
            if during_start:
                raise ControllerError(f"ingest worker {index} could not start: {body}")
            logger.error("ingest worker %d could not start: %s", index, body)

    def _reap(self, slot: _Slot, *, during_start: bool) -> None:
        process = slot.process
        assert process is not None
        if slot.conn is not None:
            self._read(slot, during_start=during_start)
        process.join(5.0)
        code = process.exitcode
        if slot.conn is not None:
            slot.conn.close()
        ran_s = time.monotonic() - slot.started_at
        with self._lock:
            slot.process, slot.conn, slot.ready = None, None, False
        self._batcher.remote_queue(slot.config.index, 0, 0)
        if during_start:
            raise ControllerError(
                f"ingest worker {slot.config.index} exited while starting (exit code {code}): "
                "see its log lines above"
            )
        if self._stopping.is_set():
            return
        slot.failures = 0 if ran_s >= STEADY_S else slot.failures + 1
        delay = 0.0 if slot.failures <= 1 else min(MAX_BACKOFF_S, 0.5 * 2**slot.failures)
        slot.restart_at = time.monotonic() + delay
        logger.warning(
            "ingest worker %d (pid %s) exited with code %s; restarting it%s",
            slot.config.index,
            slot.pid,
            code,
            f" in {delay:.0f} s" if delay else "",
        )

    def _restart_due(self) -> None:
        now = time.monotonic()
        for slot in self._slots:
            if slot.process is None and slot.restart_at is not None and now >= slot.restart_at:
                self._spawn(slot)
                with self._lock:
                    self._restarts += 1

    def _end_all(self, timeout_s: float) -> None:
        """Make sure no worker is left running (after the supervisor, or when start failed)."""
        for slot in self._slots:
            if slot.process is not None and slot.process.is_alive():
                slot.process.terminate()
        deadline = time.monotonic() + timeout_s
        for slot in self._slots:
            process = slot.process
            if process is None:
                continue
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                logger.warning("ingest worker %d did not stop; killing it", slot.config.index)
                process.kill()
                process.join(5.0)
            if slot.conn is not None:
                try:
                    while slot.conn.poll():
                        self._handle(slot, slot.conn.recv(), during_start=False)
                except (EOFError, OSError):
                    pass
                slot.conn.close()
            with self._lock:
                slot.process, slot.conn, slot.ready = None, None, False
