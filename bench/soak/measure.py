"""What a soak run measures: telemetry produced vs stored, failed inference requests and what
explains them, and per process file descriptors, threads, RSS and spool size.

The counting functions are pure; :func:`snapshot`, :func:`stored_samples`, :func:`pending_samples`
and :func:`unspooled_samples` read the processes, the database, the spools and the agents' logs.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psutil
import sqlalchemy as sa

from bench.soak.parts import Request

SPOOL_FILES = ("spool.sqlite3", "spool.sqlite3-wal", "spool.sqlite3-shm")
UNSPOOLED = re.compile(r"cannot spool telemetry (\S+): (.*)$")


@dataclass(frozen=True)
class ProcStat:
    """One process at one moment."""

    pid: int
    fds: int
    threads: int
    rss: int
    spool_bytes: int | None = None
    sockets: int = 0
    """Of ``fds``, sockets (peers' connections, keep-alive HTTP, the database pool)."""
    spool_wal_bytes: int | None = None
    """Of ``spool_bytes``, SQLite's write-ahead log (``spool.sqlite3-wal``)."""


def spool_bytes(state_dir: Path) -> int:
    """The agent's spool on disk: its database, write-ahead log and shared-memory index.

    Not what is waiting (that is ``pending_in_spool``): the WAL keeps its size after each
    checkpoint (SQLite writes it again from its start; ``journal_size_limit`` is not set), so it
    grows to about ``wal_autocheckpoint`` (1000 pages of 4 KiB, about 4 MiB) within the first
    few hundred samples and stays there; the database file keeps the pages freed by delivered
    rows on its free list for the next ones, so it stays at its largest backlog.
    """
    return sum((state_dir / f).stat().st_size for f in SPOOL_FILES if (state_dir / f).exists())


def _wal_bytes(state_dir: Path) -> int:
    wal = state_dir / SPOOL_FILES[1]
    return wal.stat().st_size if wal.exists() else 0


def snapshot(pid: int, state_dir: Path | None = None) -> ProcStat:
    """fds, threads and RSS of ``pid`` (children included: an agent's worker processes)."""
    proc = psutil.Process(pid)
    procs = [proc, *proc.children(recursive=True)]
    fds = threads = rss = sockets = 0
    for p in procs:
        try:
            fds += p.num_fds()
            threads += p.num_threads()
            rss += p.memory_info().rss
            sockets += _sockets(p.pid)
        except psutil.NoSuchProcess:
            continue
    spool = spool_bytes(state_dir) if state_dir else None
    wal = _wal_bytes(state_dir) if state_dir else None
    return ProcStat(pid, fds, threads, rss, spool, sockets, wal)


def _sockets(pid: int) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += os.readlink(fd).startswith("socket:")
        except OSError:
            continue
    return count


SOCKET_SLACK = 2
"""Sockets may differ by this many between two moments without a leak: a keep-alive HTTP
connection or a database pool connection opened or closed in between."""


def leaks(start: ProcStat, end: ProcStat, rss_growth: float = 0.05) -> list[str]:
    """What grew from ``start`` to ``end`` of one process life: files and pipes (any), sockets
    (beyond :data:`SOCKET_SLACK`), threads (any), RSS (over 5 %)."""
    found = []
    files_start, files_end = start.fds - start.sockets, end.fds - end.sockets
    if files_end > files_start:
        found.append(f"fds {files_start}->{files_end} (not sockets)")
    if end.sockets > start.sockets + SOCKET_SLACK:
        found.append(f"sockets {start.sockets}->{end.sockets}")
    if end.threads > start.threads:
        found.append(f"threads {start.threads}->{end.threads}")
    if start.rss and end.rss > start.rss * (1 + rss_growth):
        found.append(f"rss {start.rss / 2**20:.1f}->{end.rss / 2**20:.1f}MiB")
    return found


@dataclass(frozen=True)
class TelemetryCount:
    produced: int
    stored: int
    pending: int
    """Still in an agent's spool at the end (sent at its next start; not lost)."""
    unspooled: int
    """Of the lost, those the agent logged it could not spool (its state directory was full)."""
    lost: int
    duplicated: int
    lost_ids: tuple[str, ...] = ()


def _seq(sample_id: str) -> tuple[str, int] | None:
    device, _, rest = sample_id.partition(":")
    boot, _, seq = rest.rpartition(":")
    if not device or not boot or not seq.isdigit():
        return None
    return f"{device}:{boot}", int(seq)


def count_telemetry(
    stored: Iterable[str], pending: Iterable[str], unspooled: Iterable[str]
) -> TelemetryCount:
    """Produced is every sequence number from 1 to the highest seen per agent boot (ids are
    ``<device>:<boot>:<seq>``, consecutive within a boot); lost is a produced id neither stored
    nor still spooled (``unspooled``: how many of those the agent logged it could not spool);
    duplicated is an id stored more than once."""
    stored_list = list(stored)
    counts = Counter(stored_list)
    kept = set(counts) | set(pending)
    unspooled_set = set(unspooled) - kept
    top: dict[str, int] = {}
    for sid in kept | unspooled_set:
        parsed = _seq(sid)
        if parsed is not None:
            top[parsed[0]] = max(top.get(parsed[0], 0), parsed[1])
    produced = sum(top.values())
    missing = {f"{boot}:{n}" for boot, hi in top.items() for n in range(1, hi + 1)} - kept
    return TelemetryCount(
        produced=produced,
        stored=len(counts),
        pending=len(set(pending) - set(counts)),
        unspooled=len(missing & unspooled_set),
        lost=len(missing),
        duplicated=sum(n - 1 for n in counts.values()),
        lost_ids=tuple(
            sorted(
                missing,
                key=lambda x: (x.rsplit(":", 1)[0], int(x.rsplit(":", 1)[1])),
            )
        ),
    )


def stored_samples(db_url: str, devices: list[str]) -> list[tuple[str, datetime]]:
    """Every stored sample (id, timestamp) of ``devices`` (one row per stored sample)."""
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT sample_id, ts FROM telemetry_samples WHERE device_id IN :d"
                ).bindparams(sa.bindparam("d", expanding=True)),
                {"d": devices},
            )
            return [(str(r[0]), r[1]) for r in rows]
    finally:
        engine.dispose()


def stored_since(db_url: str, devices: list[str], since: datetime) -> bool:
    """Whether every one of ``devices`` has a sample stored with a timestamp after ``since``
    (False while the database does not answer)."""
    if not devices:
        return True
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT device_id FROM telemetry_samples WHERE device_id IN :d AND ts > :t "
                    "GROUP BY device_id"
                ).bindparams(sa.bindparam("d", expanding=True)),
                {"d": devices, "t": since},
            )
            return {str(r[0]) for r in rows} == set(devices)
    except sa.exc.SQLAlchemyError:
        return False
    finally:
        engine.dispose()


def pending_samples(state_dir: Path) -> list[str]:
    """Telemetry ids still waiting in a stopped agent's spool."""
    path = state_dir / "spool.sqlite3"
    if not path.exists():
        return []
    with sqlite3.connect(str(path)) as db:
        return [r[0] for r in db.execute("SELECT key FROM entries WHERE channel='telemetry'")]


def unspooled_samples(logs: Iterable[Path]) -> dict[str, str]:
    """Sample id → reason, for every sample an agent logged it could not spool."""
    found: dict[str, str] = {}
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            m = UNSPOOLED.search(line)
            if m:
                found[m.group(1)] = m.group(2)
    return found


@dataclass(frozen=True)
class Window:
    """An agent was down (killed) from ``start`` until it served again at ``end``."""

    agent: int
    start: float
    end: float


def explain_failures(
    requests: Iterable[Request], windows: Iterable[Window], grace_s: float = 1.0
) -> tuple[list[Request], list[Request]]:
    """Failed requests split into (explained by an agent kill, unexplained)."""
    ws = list(windows)
    explained: list[Request] = []
    unexplained: list[Request] = []
    for r in requests:
        if r.ok:
            continue
        hit = any(w.agent == r.agent and w.start - grace_s <= r.t <= w.end + grace_s for w in ws)
        (explained if hit else unexplained).append(r)
    return explained, unexplained


def lost_near(lost_ids: Iterable[str], stored: Iterable[tuple[str, datetime]]) -> list[str]:
    """Each lost id with the timestamp of the stored sample just before it in its boot."""
    by_id = dict(stored)
    out = []
    for sid in lost_ids:
        boot, _, seq = sid.rpartition(":")
        before = [by_id.get(f"{boot}:{n}") for n in range(int(seq) - 1, 0, -1)]
        prev = next((t for t in before if t is not None), None)
        out.append(f"{sid} (after the sample of {prev.isoformat() if prev else '?'})")
    return out
