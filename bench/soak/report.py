"""The soak's printed result: the per-process table, the failed requests, and the last line
``soak: minutes=M faults=F lost=L duplicated=D failed_requests=K converged_s=X leaks=none|<list>``
exactly as the soak's goals state it."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.soak.measure import ProcStat, TelemetryCount


@dataclass
class ProcRow:
    name: str
    start: ProcStat | None
    end: ProcStat | None
    note: str = ""
    leaks: list[str] = field(default_factory=list)


def soak_line(
    minutes: float,
    faults: int,
    telemetry: TelemetryCount,
    failed_requests: int,
    converged_s: float | None,
    leaks: list[str],
) -> str:
    conv = "never" if converged_s is None else f"{converged_s:.1f}"
    leak_text = "none" if not leaks else ",".join(x.replace(" ", "_") for x in leaks)
    return (
        f"soak: minutes={minutes:g} faults={faults} lost={telemetry.lost} "
        f"duplicated={telemetry.duplicated} failed_requests={failed_requests} "
        f"converged_s={conv} leaks={leak_text}"
    )


def _stat(s: ProcStat | None) -> str:
    if s is None:
        return "- | - | - | -"
    spool = "-" if s.spool_bytes is None else f"{s.spool_bytes / 1024:.0f} KiB"
    if s.spool_bytes is not None and s.spool_wal_bytes is not None:
        spool += f" (WAL {s.spool_wal_bytes / 1024:.0f})"
    return f"{s.fds} ({s.sockets} sockets) | {s.threads} | {s.rss / 2**20:.1f} MiB | {spool}"


def table(rows: list[ProcRow]) -> str:
    lines = [
        "| process | start fds / threads / RSS / spool | end fds / threads / RSS / spool | "
        "leaks | note |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.name} | {_stat(r.start).replace(' | ', ' / ')} | "
            f"{_stat(r.end).replace(' | ', ' / ')} | {', '.join(r.leaks) or 'none'} | {r.note} |"
        )
    return "\n".join(lines)


def spool_note() -> str:
    """What the table's spool figure is (it is not what waits in the spool)."""
    return (
        "spool = the agent's spool files on disk (spool.sqlite3, -wal, -shm), not what waits in "
        "it (pending_in_spool). SQLite reuses its write-ahead log from the start after each "
        "checkpoint without shrinking it, so the WAL grows to about 1000 pages (~4 MiB, "
        "wal_autocheckpoint) in the first few hundred samples and stays there; the database "
        "file keeps the pages of delivered rows on its free list for the next ones. Both are "
        "bounded (by the checkpoint and by the largest backlog, at most spool_max_mib); a start "
        "figure below ~4 MiB only means the WAL had not yet reached its size."
    )


def telemetry_text(t: TelemetryCount) -> str:
    return (
        f"telemetry (real agents): produced={t.produced} stored={t.stored} "
        f"pending_in_spool={t.pending} lost={t.lost} (of which not spooled, disk full: "
        f"{t.unspooled}) "
        f"duplicated={t.duplicated}"
    )
