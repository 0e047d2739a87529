"""The soak's printed result: the per-process table, the failed requests, and the last line
``soak: minutes=M faults=F lost=L duplicated=D failed_requests=K converged_s=X leaks=none|<list>``
exactly as issue 18 writes it."""

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


def telemetry_text(t: TelemetryCount) -> str:
    return (
        f"telemetry (real agents): produced={t.produced} stored={t.stored} "
        f"pending_in_spool={t.pending} lost={t.lost} (of which not spooled, disk full: "
        f"{t.unspooled}) "
        f"duplicated={t.duplicated}"
    )
