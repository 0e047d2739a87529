"""Store-and-forward: a disk-backed queue of outgoing messages, and the forwarder that drains it.

Telemetry samples and events are appended to the :class:`Spool` (SQLite in WAL mode, one row
per message, committed with ``synchronous=FULL`` before ``append`` returns) and leave it only
when the :class:`Forwarder` has seen the broker acknowledge them (QoS 1). So a broker outage, a
network cut or an agent crash loses nothing and, once a message is acknowledged, never sends it
again. A message sent but not yet acknowledged when the agent dies is sent again after the
restart; its idempotency key lets the controller store it once.

The spool is bounded by bytes and by age: when either is exceeded the oldest rows go first, and
the number dropped is kept in the database next to them, so the loss itself can be reported.

The forwarding thread runs under :class:`shared.supervision.Supervised` (policy ``restart``): a
spool or publisher that raises (a full disk, a bug in the link) is logged and forwarding resumes
after a backoff; the entries stay spooled, so nothing is lost meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from shared.supervision import Supervised

log = logging.getLogger(__name__)

SPOOL_FILE = "spool.sqlite3"
DEFAULT_MAX_BYTES = 64 << 20
DEFAULT_MAX_AGE_S = 7 * 24 * 3600.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    key TEXT NOT NULL UNIQUE,
    payload BLOB NOT NULL,
    size INTEGER NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO counters (name, value) VALUES ('dropped', 0);
INSERT OR IGNORE INTO counters (name, value) VALUES ('bytes', 0);
"""


class SpoolError(RuntimeError):
    """The spool file cannot be opened or written; the message names the file and the fix."""


@dataclass(frozen=True)
class SpoolEntry:
    """One spooled message, in the order it was appended (``id`` grows, never reused)."""

    id: int
    channel: str
    key: str
    payload: bytes
    created: float


@dataclass(frozen=True)
class SpoolStats:
    """What is waiting, and how much was dropped to stay within bounds (ever, persisted)."""

    entries: int
    bytes: int
    dropped: int
    oldest_created: float | None


def entry_size(channel: str, key: str, payload: bytes) -> int:
    """Bytes an entry counts against ``max_bytes``: payload plus its names."""
    return len(payload) + len(channel.encode()) + len(key.encode())


def ids_over_budget(
    oldest_first: Iterable[tuple[int, int]], total_bytes: int, max_bytes: int
) -> tuple[list[int], int]:
    """The oldest ``(id, size)`` rows to drop so ``total_bytes`` fits; and the bytes they free."""
    ids: list[int] = []
    freed = 0
    for entry_id, size in oldest_first:
        if total_bytes - freed <= max_bytes:
            break
        ids.append(entry_id)
        freed += size
    return ids, freed


class Spool:
    """A durable FIFO of ``(channel, payload, key)``; thread-safe, one file, many restarts."""

    def __init__(
        self,
        path: Path,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_bytes <= 0 or max_age_s <= 0:
            raise ValueError("spool bounds must be positive: set max_bytes and max_age_s > 0")
        self.path = path
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self._clock = clock
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise SpoolError(
                f"cannot open the telemetry spool {path}: {exc}; check that the state directory "
                "is writable by the agent and not full, or delete a corrupt spool file"
            ) from exc

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database; appended entries are already on disk."""
        with self._lock:
            self._db.close()

    def append(self, channel: str, payload: bytes, key: str) -> bool:
        """Store one message durably; ``False`` if ``key`` is already waiting (not stored twice).

        Enforces the bounds afterwards, so the new entry may push the oldest ones out.
        """
        size = entry_size(channel, key, payload)
        if size > self.max_bytes:
            raise ValueError(
                f"a {size}-byte message cannot fit a spool of {self.max_bytes} bytes: "
                "raise the spool's max_bytes"
            )
        with self._lock, self._write():
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO entries (channel, key, payload, size, created) "
                "VALUES (?, ?, ?, ?, ?)",
                (channel, key, payload, size, self._clock()),
            )
            stored = cursor.rowcount == 1
            if stored:
                self._add_counter("bytes", size)
                self._enforce_bounds()
        return stored

    def peek(self, n: int) -> list[SpoolEntry]:
        """The ``n`` oldest waiting entries, oldest first; they stay until acknowledged."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, channel, key, payload, created FROM entries ORDER BY id LIMIT ?", (n,)
            ).fetchall()
        return [SpoolEntry(int(r[0]), str(r[1]), str(r[2]), bytes(r[3]), float(r[4])) for r in rows]

    def ack(self, ids: Sequence[int]) -> int:
        """Remove delivered entries; answers how many were still there (dropped ones are not)."""
        if not ids:
            return 0
        removed = 0
        with self._lock, self._write():
            for start in range(0, len(ids), 500):
                chunk = list(ids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                size = self._db.execute(
                    f"SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries WHERE id IN ({marks})",  # noqa: S608
                    chunk,
                ).fetchone()
                self._db.execute(f"DELETE FROM entries WHERE id IN ({marks})", chunk)  # noqa: S608
                removed += int(size[0])
                self._add_counter("bytes", -int(size[1]))
        return removed

    @property
    def dropped(self) -> int:
        """Entries dropped to stay within bounds since the spool file was created."""
        with self._lock:
            return self._counter("dropped")

    def stats(self) -> SpoolStats:
        """Entries and bytes waiting, the dropped count and the oldest entry's time."""
        with self._lock:
            count, oldest = self._db.execute(
                "SELECT COUNT(*), MIN(created) FROM entries"
            ).fetchone()
            return SpoolStats(
                entries=int(count),
                bytes=self._counter("bytes"),
                dropped=self._counter("dropped"),
                oldest_created=float(oldest) if oldest is not None else None,
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    # --- internals (caller holds the lock) ---------------------------------------------------

    def _write(self) -> _Transaction:
        return _Transaction(self._db, self.path)

    def _counter(self, name: str) -> int:
        row = self._db.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()
        return int(row[0]) if row else 0

    def _add_counter(self, name: str, delta: int) -> None:
        self._db.execute("UPDATE counters SET value = value + ? WHERE name = ?", (delta, name))

    def _enforce_bounds(self) -> None:
        cutoff = self._clock() - self.max_age_s
        aged = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries WHERE created < ?", (cutoff,)
        ).fetchone()
        if aged[0]:
            self._db.execute("DELETE FROM entries WHERE created < ?", (cutoff,))
            self._add_counter("bytes", -int(aged[1]))
            self._add_counter("dropped", int(aged[0]))
        total = self._counter("bytes")
        if total <= self.max_bytes:
            return
        rows = self._db.execute("SELECT id, size FROM entries ORDER BY id")
        ids, freed = ids_over_budget(((int(i), int(s)) for i, s in rows), total, self.max_bytes)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            self._db.execute(f"DELETE FROM entries WHERE id IN ({marks})", chunk)  # noqa: S608
        self._add_counter("bytes", -freed)
        self._add_counter("dropped", len(ids))


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (rollback on error); SQLite errors become SpoolError."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._db = db
        self._path = path

    def __enter__(self) -> None:
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise SpoolError(f"cannot write the telemetry spool {self._path}: {exc}") from exc

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise SpoolError(
                    f"cannot write the telemetry spool {self._path}: {exc}; check free space "
                    "in the state directory"
                ) from exc
            return
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise SpoolError(
                f"cannot commit to the telemetry spool {self._path}: {exc}; check free space "
                "in the state directory"
            ) from exc


# --- forwarding ------------------------------------------------------------------------------

Publish = Callable[[SpoolEntry], bool]
"""Send one entry and wait for the broker's acknowledgement; ``True`` only once it came."""


@dataclass(frozen=True)
class DrainResult:
    """How one drain ended: entries delivered, and whether a publish failed."""

    delivered: int
    failed: bool


def next_retry_delay(previous_s: float | None, base_s: float, cap_s: float) -> float:
    """Exponential backoff between failed drains: base, twice that, and so on up to ``cap_s``."""
    if previous_s is None:
        return base_s
    return min(cap_s, previous_s * 2)


class Forwarder:
    """Drains a spool through ``publish`` in order, stopping at the first failure.

    ``drain`` is the synchronous core (tests and shutdown use it); ``start`` runs it on a thread
    that wakes on :meth:`notify` (call it after ``append``, or when the broker is back), after
    ``idle_s`` without news, and after a backoff when the broker did not acknowledge; a
    :meth:`notify` cuts the backoff short.
    """

    def __init__(
        self,
        spool: Spool,
        publish: Publish,
        batch: int = 100,
        idle_s: float = 5.0,
        retry_base_s: float = 0.5,
        retry_cap_s: float = 30.0,
    ) -> None:
        self._spool = spool
        self._publish = publish
        self._batch = batch
        self._idle_s = idle_s
        self._retry_base_s = retry_base_s
        self._retry_cap_s = retry_cap_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: Supervised | None = None

    def drain(self, limit: int | None = None) -> DrainResult:
        """Publish waiting entries oldest first until empty, ``limit``, or the first failure.

        Delivered entries are acknowledged in the spool after each batch (and before returning),
        so a crash repeats at most one batch, never more.
        """
        delivered = 0
        while limit is None or delivered < limit:
            want = self._batch if limit is None else min(self._batch, limit - delivered)
            entries = self._spool.peek(want)
            if not entries:
                return DrainResult(delivered, failed=False)
            done: list[int] = []
            failed = False
            for entry in entries:
                if not self._publish(entry):
                    failed = True
                    break
                done.append(entry.id)
            self._spool.ack(done)
            delivered += len(done)
            if failed:
                return DrainResult(delivered, failed=True)
        return DrainResult(delivered, failed=False)

    def notify(self) -> None:
        """Wake the forwarding thread: something was appended."""
        self._wake.set()

    def start(self) -> None:
        """Forward on a supervised daemon thread until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = Supervised(
            "spool-forwarder", self._run, policy="restart", stop=self._stop, logger=log
        ).start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread after the publish in progress; waiting entries stay spooled."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)

    def _run(self) -> None:
        """The thread's body: drain on every wake-up until stopped (a raise restarts it)."""
        delay: float | None = None
        while not self._stop.is_set():
            self._wake.clear()
            result = self.drain()
            if result.failed:
                delay = next_retry_delay(delay, self._retry_base_s, self._retry_cap_s)
                self._wake.wait(delay)
                continue
            delay = None
            self._wake.wait(self._idle_s)
