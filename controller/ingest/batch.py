"""A bounded queue and one writer thread that stores telemetry and events in batches.

Why: one transaction per sample caps ingest at a few hundred messages a second; one per batch of
thousands moves tens of thousands. Backpressure: ``submit`` blocks while the queue is full, which
stalls the MQTT network thread that calls it, so the broker holds (and eventually throttles) the
publishers instead of the controller growing without bound. The writer also runs upkeep between
batches: it recomputes the minute rollups touched since the last upkeep, then applies retention.

The writer thread runs under :class:`shared.supervision.Supervised` (policy ``restart``): an
unexpected exception is logged and the writer starts again after a backoff, so the queue keeps
draining instead of filling until ``submit`` blocks the ingest link for good. What happens to the
batch it crashed on is said at :meth:`IngestBatcher._run`.

Acknowledge after storing: ``after_written(done)`` puts ``done`` in the queue behind
everything submitted before it; the writer calls it once the batch holding those messages is
written, or given up message by message (what the database still refuses then is counted as
dropped: acknowledging it is what stops the broker from sending a poison message for ever). The
ingest link uses it to write a read's PUBACKs only then.

A database that cannot be reached (PostgreSQL restarted, a connection refused or cut,
the server shutting down; :func:`controller.db.session.unavailable`) is not a refusal of the
data: the writer holds the batch and writes it again (:class:`controller.ingest.outage.Outage`:
back-off, ``outage_limit_s``, one line when it starts and one when the database is back). Its
``done`` markers wait, so the broker keeps those messages unacknowledged meanwhile. Past the
limit the batch is given up as above. Stopping during an outage leaves the batch
unacknowledged (neither stored nor dropped, and no later ``done`` marker runs): the broker
sends it again to the next session under the same client id.

Concurrency: ``submit``, ``after_written``, ``drain``, ``stats`` and ``absorb`` run on any thread
and share the queue and counters under ``_cond``; ``_pending`` and ``_crashes`` belong to the
writer thread. ``done`` callables run on the writer thread and must not block.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime

from controller.db.schema import utcnow
from controller.db.session import unavailable
from controller.db.telemetry_store import Retention, TelemetryStore
from controller.errors import ControllerError
from controller.ingest.batch_stats import BatchCounts, BatchStats
from controller.ingest.outage import OUTAGE_LIMIT_S, Outage
from shared.messages import Event
from shared.supervision import Supervised
from shared.telemetry import Telemetry

logger = logging.getLogger(__name__)

_ATTEMPTS = 4
"""Writes of one batch before it is given up (stored one message at a time, see ``_give_up``)."""

Done = Callable[[], None]
Item = Telemetry | Event | Done
"""What the queue holds: messages, and the ``done`` markers of
:meth:`IngestBatcher.after_written`."""


class IngestBatcher:
    """``submit`` from any thread; ``start``/``stop`` the writer; ``drain`` waits until written."""

    def __init__(
        self,
        store: TelemetryStore,
        *,
        capacity: int = 50_000,
        max_batch: int = 5_000,
        linger_s: float = 0.05,
        retention: Retention | None = None,
        upkeep_every_s: float = 10.0,
        clock: Callable[[], datetime] = utcnow,
        outage_limit_s: float = OUTAGE_LIMIT_S,
    ) -> None:
        self._store = store
        self._capacity = capacity
        self._max_batch = max_batch
        self._linger = linger_s
        self._retention = retention or Retention()
        self._upkeep_every = upkeep_every_s
        self._outage_limit = outage_limit_s
        self._clock = clock
        self._items: deque[Item] = deque()
        self._cond = threading.Condition()
        self._in_flight = 0
        self._stopping = False
        self._writer: Supervised | None = None
        self._pending: list[Item] = []
        """The batch being written; still set after the writer crashed on it (see ``_run``)."""
        self._crashes = 0
        """How many runs of the writer crashed on ``_pending``."""
        self._holding_acks = False
        """Set once a batch was left unacknowledged while stopping (see ``_release``)."""
        self._dirty: set[tuple[str, datetime]] = set()
        self._last_upkeep = time.monotonic()
        self._rate_window: deque[tuple[float, int]] = deque(maxlen=64)
        self._samples = self._duplicates = self._events = self._batches = 0
        self._errors = self._dropped = 0
        self._blocked = 0.0
        self._remote_queues: dict[int, tuple[int, int]] = {}
        self.on_written: Callable[[int], None] | None = None
        """Called from the writer thread with the number of messages each batch handled."""

    @property
    def retention(self) -> Retention:
        """How long raw samples and rollups are kept."""
        return self._retention

    def start(self) -> None:
        """Start the writer thread (supervised: restarted after a crash)."""
        self._stopping = False
        self._holding_acks = False
        self._writer = Supervised("jetfleet-ingest", self._run, policy="restart", logger=logger)
        self._writer.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Write what is queued, refresh rollups, then end the writer thread.

        The supervisor gets no stop event on purpose: a writer that crashes while stopping is
        restarted once more to write what is left (given up at once, see ``_run``).
        """
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._writer is not None:
            self._writer.join(timeout_s)
            self._writer = None

    def submit(self, item: Telemetry | Event) -> None:
        """Queue one message; blocks while the queue is full (backpressure)."""
        with self._cond:
            if len(self._items) >= self._capacity:
                began = time.monotonic()
                while len(self._items) >= self._capacity and not self._stopping:
                    self._cond.wait(1.0)
                self._blocked += time.monotonic() - began
            self._items.append(item)
            if len(self._items) >= self._max_batch or len(self._items) == 1:
                self._cond.notify_all()

    def after_written(self, done: Done) -> None:
        """Call ``done`` (on the writer thread) once everything submitted before it is written."""
        with self._cond:
            self._items.append(done)
            if len(self._items) == 1:
                self._cond.notify_all()

    def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait until everything submitted so far is written (tests, shutdown); False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._items or self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def upkeep_now(self) -> None:
        """Refresh dirty rollups and apply retention now (normally every ``upkeep_every_s``)."""
        with self._cond:
            dirty, self._dirty = self._dirty, set()
        done = False
        try:
            self._store.refresh_rollups(dirty)
            self._store.prune(self._clock(), self._retention)
            done = True
        except ControllerError as exc:
            logger.error("telemetry upkeep failed (retried later): %s", exc)
        finally:
            if not done:  # also when an unexpected error crashes the writer: retried after it
                with self._cond:
                    self._dirty |= dirty
        self._last_upkeep = time.monotonic()

    def absorb(self, counts: BatchCounts) -> None:
        """Add what an ingest worker process's own batcher wrote (see ``ingest_pool``)."""
        with self._cond:
            self._samples += counts.samples_persisted
            self._duplicates += counts.samples_duplicate
            self._events += counts.events_persisted
            self._batches += counts.batches
            self._errors += counts.write_errors
            self._dropped += counts.dropped
            self._blocked += counts.blocked_s
            if counts.samples_persisted:
                self._rate_window.append((time.monotonic(), self._samples))

    def remote_queue(self, worker: int, queued: int, capacity: int) -> None:
        """The queue depth and bound a worker process last reported (0, 0 once it is gone)."""
        with self._cond:
            self._remote_queues[worker] = (queued, capacity)

    def stats(self) -> BatchStats:
        with self._cond:
            window = list(self._rate_window)
            rate = 0.0
            if len(window) >= 2 and window[-1][0] > window[0][0]:
                rate = (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])
            remote = self._remote_queues.values()
            return BatchStats(
                queued=len(self._items) + self._in_flight + sum(q for q, _ in remote),
                capacity=self._capacity + sum(c for _, c in remote),
                samples_persisted=self._samples,
                samples_duplicate=self._duplicates,
                events_persisted=self._events,
                batches=self._batches,
                write_errors=self._errors,
                dropped=self._dropped,
                blocked_s=self._blocked,
                rate_per_s=rate,
            )

    # --- the writer thread -------------------------------------------------------------------

    def _run(self) -> None:
        """The writer thread's body, run under :class:`Supervised` (policy ``restart``).

        A write that raises something other than :class:`ControllerError` (a bug, or a driver
        error the store failed to translate) crashes the writer. The batch it was writing is
        neither stored nor dropped: it stays in ``_pending`` and in flight (``drain`` waits for
        it, ``stats`` counts it as queued), and the restarted writer first writes it again,
        counting each crash as a write error. Those are the retry rules of a batch the database
        refuses: after :data:`_ATTEMPTS` crashes on it, or while stopping, it is given up: stored
        one message at a time, and each message that still fails is dropped, counted and logged.
        """
        if self._pending:
            self._resume()
        while True:
            batch = self._take()
            if batch:
                self._write(batch)
            elif self._stopping:
                break
            if time.monotonic() - self._last_upkeep >= self._upkeep_every:
                self.upkeep_now()
        self.upkeep_now()

    def _take(self) -> list[Item]:
        with self._cond:
            if not self._items and not self._stopping:
                self._cond.wait(1.0)
            if self._items and len(self._items) < self._max_batch and not self._stopping:
                # Linger briefly so a burst becomes one batch rather than many tiny ones.
                self._cond.wait(self._linger)
            count = min(len(self._items), self._max_batch)
            batch = [self._items.popleft() for _ in range(count)]
            self._in_flight = count
            self._cond.notify_all()
            return batch

    def _resume(self) -> None:
        """Write the batch a crashed run left in ``_pending`` again, or give it up."""
        batch = self._pending
        self._crashes += 1
        with self._cond:
            self._errors += 1
        if self._crashes < _ATTEMPTS and not self._stopping:
            logger.warning(
                "writing again the %d telemetry messages the ingest writer crashed on", len(batch)
            )
            self._write(batch)
            return
        logger.error(
            "giving up the batch of %d telemetry messages the ingest writer crashed on %d times",
            len(batch),
            self._crashes,
        )
        self._give_up(
            [m for m in batch if isinstance(m, Telemetry)],
            [m for m in batch if isinstance(m, Event)],
        )
        self._done(batch)

    def _write(self, batch: list[Item]) -> None:
        self._pending = batch
        samples = [m for m in batch if isinstance(m, Telemetry)]
        events = [m for m in batch if isinstance(m, Event)]
        if not samples and not events:  # only markers
            self._pending = []
            with self._cond:
                self._in_flight = 0
                self._cond.notify_all()
            self._done(batch)
            return
        attempt = 0
        outage: Outage | None = None
        while True:
            try:
                result = self._store.write_batch(samples, events, self._clock())
                break
            except ControllerError as exc:
                with self._cond:
                    self._errors += 1
                if unavailable(exc):
                    what = f"{len(samples) + len(events)} telemetry messages"
                    outage = outage or Outage(what, self._outage_limit, exc)
                    if self._stopping:
                        logger.warning(
                            "stopping while the database is unavailable: %s left unacknowledged "
                            "(the broker sends them again to the next session)",
                            what,
                        )
                        self._release()
                        return
                    if outage.holds():
                        outage.pause()
                        continue
                    outage.give_up(exc)
                    self._give_up(samples, events)
                    self._done(batch)
                    return
                logger.error("storing %d telemetry messages failed: %s", len(batch), exc)
                attempt += 1
                if self._stopping or attempt >= _ATTEMPTS:
                    self._give_up(samples, events)
                    self._done(batch)
                    return
                time.sleep(0.5 * 2 ** (attempt - 1))  # back off while the database recovers
        if outage is not None:
            outage.over()
        self._pending, self._crashes = [], 0
        with self._cond:
            self._samples += result.samples_inserted
            self._duplicates += result.samples_duplicate
            self._events += result.events_inserted
            self._batches += 1
            self._dirty |= result.dirty
            self._in_flight = 0
            self._rate_window.append((time.monotonic(), self._samples))
            self._cond.notify_all()
        if self.on_written is not None:
            self.on_written(len(samples) + len(events))
        self._done(batch)

    def _done(self, batch: list[Item]) -> None:
        """Run the ``done`` markers of ``batch`` unless a batch was left unacknowledged while
        stopping: a marker may stand for a read split over that batch and this one."""
        if not self._holding_acks:
            _call(batch)

    def _release(self) -> None:
        """Forget the batch in flight without storing, dropping or acknowledging it; no
        ``done`` marker runs after this until the next ``start``."""
        self._holding_acks = True
        self._pending, self._crashes = [], 0
        with self._cond:
            self._in_flight = 0
            self._cond.notify_all()

    def _give_up(self, samples: list[Telemetry], events: list[Event]) -> None:
        """Store the batch one message at a time; count those the database still refuses."""
        now = self._clock()
        for one_s, one_e in [([s], []) for s in samples] + [([], [e]) for e in events]:
            try:
                result = self._store.write_batch(one_s, one_e, now)
            except Exception as exc:  # the last resort: count it, never crash the writer on it
                unexpected = not isinstance(exc, ControllerError)
                logger.error(
                    "dropped a telemetry message the database refuses: %s", exc, exc_info=unexpected
                )
                with self._cond:
                    self._dropped += 1
                continue
            with self._cond:
                self._samples += result.samples_inserted
                self._duplicates += result.samples_duplicate
                self._events += result.events_inserted
                self._dirty |= result.dirty
        self._pending, self._crashes = [], 0
        with self._cond:
            self._in_flight = 0
            self._cond.notify_all()
        if self.on_written is not None:
            self.on_written(len(samples) + len(events))


def _call(batch: list[Item]) -> None:
    """Run the ``done`` markers of a batch that is written (or given up), in queue order."""
    for item in batch:
        if not isinstance(item, (Telemetry, Event)):
            try:
                item()
            except Exception:  # one caller's bug must not crash the writer
                logger.exception("an after-written callback failed")
