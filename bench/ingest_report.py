"""The telemetry ingest bench's results file (``bench/ingest.py``): its two tables, the notes,
and the ``ingest:`` summary line, every figure from the run itself; the controller paths are
compared with the C clients' ceiling measured in the same run."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bench.provenance import Provenance
from bench.results_file import ratio, write


@dataclass(frozen=True)
class Measured:
    """One row of table 1: a path from the publishers to where messages end."""

    path: str  # the table's label
    seconds: float  # from the first publish until the last message arrived / row was stored
    messages: int  # messages received (ceiling) or rows stored (controller)
    cpu: dict[str, float]  # CPU seconds per part over the timed window (CpuMeter)
    key: str = ""  # the summary's name for a controller path, e.g. ``pg_w2``; "" for the ceiling


def table1(rows: list[Measured]) -> list[str]:
    lines = [
        "| path | messages | seconds | messages/s | % of ceiling | CPU µs/message: controller "
        "| broker | publishers | PostgreSQL |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ceiling_rate = rows[0].messages / rows[0].seconds
    for r in rows:
        per = {part: f"{1e6 * used / max(r.messages, 1):.0f}" for part, used in r.cpu.items()}
        rate = r.messages / r.seconds
        own = bool(r.key)
        lines.append(
            f"| {r.path} | {r.messages} | {r.seconds:.2f} | {rate:,.0f} | "
            f"{100 * rate / ceiling_rate:.0f} % | {per['controller'] if own else '-'} | "
            f"{per['broker']} | {per['publishers']} | {per['postgres'] if own else '-'} |"
        )
    return lines


def table2(agent: dict[str, float]) -> list[str]:
    return [
        "| agent (idle, telemetry 1 Hz, no models) | value |",
        "|---|---:|",
        f"| RSS | {agent['rss_mb']:.1f} MB |",
        f"| RSS peak | {agent['rss_peak_mb']:.1f} MB |",
        f"| USS (private) | {agent['uss_mb']:.1f} MB |",
        f"| CPU (of one core, over {agent['seconds']:.0f} s) | {agent['cpu_percent']:.2f} % |",
    ]


def summary_line(rows: list[Measured], total: int, agent: dict[str, float]) -> str:
    """The ``ingest:`` line a reader quotes: each controller path's persisted rate as a fraction
    of the same run's ceiling, its controller CPU per message, rows missing or extra, and the
    idle agent's footprint."""
    ceiling_rate = rows[0].messages / rows[0].seconds
    parts = [f"ingest: messages={total} ceiling_per_s={ceiling_rate:.0f}"]
    for r in rows[1:]:
        parts.append(
            f"{r.key}_of_ceiling={ratio(r.messages / r.seconds, ceiling_rate):.2f} "
            f"{r.key}_ctrl_us={1e6 * r.cpu['controller'] / max(r.messages, 1):.0f}"
        )
    missing = sum(max(total - r.messages, 0) for r in rows[1:])
    extra = sum(max(r.messages - total, 0) for r in rows[1:])
    parts.append(
        f"rows_missing={missing} rows_extra={extra} agent_rss_mb={agent['rss_mb']:.1f} "
        f"agent_cpu_pct={agent['cpu_percent']:.2f}"
    )
    return " ".join(parts)


def report(
    args: argparse.Namespace,
    provenance: Provenance,
    rows: list[Measured],
    notes: list[str],
    agent: dict[str, float],
) -> None:
    """Print the tables and the summary, and write ``args.out/ingest.md`` (replacing it)."""
    total = args.devices * args.per_device
    text = "\n".join([*table1(rows), "", *(f"- {n}" for n in notes), "", *table2(agent)])
    summary = summary_line(rows, total, agent)
    print(f"{text}\n\n{summary}")
    plural = "s" if args.devices > 1 else ""
    write(
        args.out,
        "ingest.py",
        "Telemetry ingest",
        f"One private Mosquitto, {args.devices} simulated device{plural} (one "
        f"`mosquitto_pub -l` process each, QoS 1) of {args.per_device} messages each, each "
        "message one Telemetry JSON. The baseline, in the same run: the ceiling, the same "
        "publishers into `mosquitto_sub` counting every message (the most this broker moves on "
        "this machine). Each controller path (the `jetfleet` controller's MQTT ingest, "
        "validation and batched writer into PostgreSQL by COPY, or SQLite with `--sqlite`; "
        "in-process or with ingest worker processes: `--ingest-workers "
        f"{args.ingest_workers}`) is timed from the first publish until the last sample is "
        "persisted (rows counted), and shown as a fraction of that ceiling (`pg_w<workers>_"
        "of_ceiling` in the summary). CPU µs/message: user + system CPU of each part over the "
        "timed window, divided by the messages (the publishers' column includes "
        "`mosquitto_sub` in the ceiling row). The second table: `jetfleet-agent run` idle "
        f"(telemetry at 1 Hz, no models) over {args.idle_s:g} s.",
        provenance,
        text,
        summary,
    )
