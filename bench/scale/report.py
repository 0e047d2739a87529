"""The scale bench's printed result: per rollout and wave, the failover, the final state, the
telemetry count, CPU per part, and last the line the scale goal is stated in:
``scale: devices=N replicas=R converged_s=X failover_s=Y telemetry_lost=L duplicated=D``."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from bench.scale.measure import MACHINE, RolloutTimes, TelemetryCount

PARTS = ("replicas", "broker", "gateways", "postgresql")


@dataclass(frozen=True)
class Failover:
    killed: str
    """Replica id of the killed leader."""
    kill_s: float
    """Seconds into the rollout at the kill."""
    wave: int
    """1-based wave the dead leader had started last."""
    successor: str | None
    takeover_s: float | None
    """Kill → another replica holds the lease (goal: ≤ lease TTL + 5 s)."""
    first_publish_s: float | None
    """Kill → the first desired document the successor published reached a gateway (the
    interrupted wave's, republished, or the next wave's): the ``failover_s`` of the line."""
    next_wave_s: float | None
    """Kill → the first gateway of the next wave received its document."""
    restarted_after_s: float


@dataclass(frozen=True)
class FinalState:
    devices: int
    on_final: int
    """Gateways serving the last rollout's version at the generation the database wants."""
    intermediate: int
    """Gateways whose generation differs from the database's desired one, or whose desired
    and observed generations differ."""
    steps_not_one: int
    """Devices whose desired generation did not move by exactly one in the killed rollout."""
    stale_documents: int
    """Desired documents older than the gateway's generation that reached it (ignored)."""
    lost_connections: int


def _f(x: float | None, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def waves_table(rollouts: list[tuple[str, RolloutTimes]]) -> str:
    lines = [
        "| rollout | wave | devices | started s | first document s | last report s | "
        "validated s | wave s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, r in rollouts:
        for w in r.waves:
            lines.append(
                f"| {label} | {w.wave} | {w.devices} | {_f(w.started_s)} | {_f(w.first_doc_s)} | "
                f"{_f(w.last_report_s)} | {_f(w.done_s)} | {_f(w.seconds)} |"
            )
        devices = sum(w.devices for w in r.waves)
        lines.append(
            f"| {label} | **all** | {devices} | | | | | **{_f(r.converged_s)}** "
            f"(create → {r.state}) |"
        )
    return "\n".join(lines)


def cpu_table(
    devices: int,
    processes: dict[str, int],
    steady: dict[str, float],
    steady_s: float,
    rollouts: dict[str, float],
    rollouts_s: float,
    whole: dict[str, float],
    whole_s: float,
) -> str:
    lines = [
        f"| part | processes | steady CPU s ({steady_s:.0f} s) | steady CPU s / device / min | "
        f"rollouts CPU s ({rollouts_s:.0f} s) | rollouts CPU s / device / min | "
        f"whole run CPU s ({whole_s:.0f} s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for part in PARTS:
        s, r, w = steady.get(part, 0.0), rollouts.get(part, 0.0), whole.get(part, 0.0)
        lines.append(
            f"| {part} | {processes.get(part, 0)} | {s:.1f} | "
            f"{s / devices / (steady_s / 60):.5f} | {r:.1f} | "
            f"{r / devices / (rollouts_s / 60):.5f} | {w:.1f} |"
        )

    def ours(d: dict[str, float]) -> float:
        return sum(v for k, v in d.items() if k in PARTS)

    total = (ours(steady), ours(rollouts), ours(whole))
    lines.append(
        f"| **all parts** | | {total[0]:.1f} | {total[0] / devices / (steady_s / 60):.5f} | "
        f"{total[1]:.1f} | {total[1] / devices / (rollouts_s / 60):.5f} | {total[2]:.1f} |"
    )
    cores = os.cpu_count() or 1
    share = [
        f"{o:.1f} ({100 * o / (span * cores):.0f} % of {cores} cores)"
        for o, span in (
            (d.get(MACHINE, 0.0) - ours(d), span)
            for d, span in ((steady, steady_s), (rollouts, rollouts_s), (whole, whole_s))
        )
    ]
    lines.append(f"| other work on this machine | | {share[0]} | | {share[1]} | | {share[2]} |")
    return "\n".join(lines)


def failover_text(f: Failover | None) -> str:
    if f is None:
        return "failover: no kill (the rollout ended before the kill wave started)"
    return (
        f"failover: leader {f.killed} killed (kill -9) {_f(f.kill_s)} s into the rollout, in "
        f"wave {f.wave}; {f.successor or 'no replica'} held the lease {_f(f.takeover_s)} s "
        f"after the kill, and its first document reached a gateway {_f(f.first_publish_s)} s "
        f"after the kill; wave {f.wave + 1}'s first document {_f(f.next_wave_s)} s after the "
        "kill; "
        f"{f.killed} started again "
        f"{f.restarted_after_s:.0f} s after the kill (same replica id)"
    )


def final_text(s: FinalState, version: str) -> str:
    return (
        f"final state: {s.on_final}/{s.devices} gateways serve {version} at the desired "
        f"generation; {s.intermediate} at another generation; {s.steps_not_one} whose "
        f"generation moved by other than one step in the killed rollout; stale documents "
        f"received (older generation, ignored): {s.stale_documents}; connections lost: "
        f"{s.lost_connections}"
    )


def telemetry_text(t: TelemetryCount) -> str:
    lost = f" (first: {', '.join(t.lost_ids[:5])})" if t.lost_ids else ""
    return (
        f"telemetry: produced={t.produced} stored={t.stored} still_waiting={t.waiting} "
        f"lost={t.lost}{lost} duplicated={t.duplicated}"
    )


def scale_line(
    devices: int,
    replicas: int,
    converged_s: float | None,
    failover_s: float | None,
    telemetry: TelemetryCount,
) -> str:
    return (
        f"scale: devices={devices} replicas={replicas} converged_s={_f(converged_s, 1)} "
        f"failover_s={_f(failover_s, 1)} telemetry_lost={telemetry.lost} "
        f"duplicated={telemetry.duplicated}"
    )
