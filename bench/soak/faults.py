"""The seeded fault schedule: pure, printed before the run.

:func:`plan` spreads faults and operator actions (rollout, rollback, redeploys) over the run so
that faults overlap the actions, every kind of fault in ``kinds`` appears at least once when the
run is long enough, and the same seed always gives the same schedule.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

BROKER_RESTART = "broker_restart"
BROKER_DOWN = "broker_down"
CONTROLLER_KILL = "controller_kill"
AGENT_KILL_SWAP = "agent_kill_mid_swap"
AGENT_KILL_DOWNLOAD = "agent_kill_mid_download"
PARTITION = "link_partition"
DISK_FULL = "state_dir_full"

FAULT_KINDS = (
    BROKER_RESTART,
    BROKER_DOWN,
    CONTROLLER_KILL,
    AGENT_KILL_SWAP,
    AGENT_KILL_DOWNLOAD,
    PARTITION,
    DISK_FULL,
)
ACTIONS = ("redeploy", "rollout", "rollback")

NOT_DONE = {
    "postgresql_restart": "the bench does not own the PostgreSQL server it is given (a shared "
    "service); restarting it would break other users. Not done.",
    "clock_step": "stepping the clock changes it for every process on the host (no per-process "
    "clock without libfaketime or a time namespace the agent is started in); not safe on a "
    "shared machine. Not done.",
}


@dataclass(frozen=True)
class Step:
    """One scheduled thing: a fault or an operator action, ``at_s`` after the start."""

    at_s: float
    kind: str
    target: str = ""
    """Agent index (as text) for agent faults, empty otherwise."""
    duration_s: float = 0.0
    """How long an outage lasts (broker down, partition, full disk); 0 for instant faults."""

    @property
    def is_fault(self) -> bool:
        return self.kind in FAULT_KINDS

    def line(self) -> str:
        who = f" agent={self.target}" if self.target else ""
        lasting = f" for {self.duration_s:.0f}s" if self.duration_s else ""
        return f"t={self.at_s:7.1f}s  {self.kind}{who}{lasting}"


def _duration(kind: str, scale: float, rng: random.Random) -> float:
    base = {BROKER_DOWN: 60.0, PARTITION: 120.0, DISK_FULL: 60.0}.get(kind, 0.0)
    if not base:
        return 0.0
    return round(max(5.0, base * scale * rng.uniform(0.75, 1.0)), 1)


def plan(
    seconds: float,
    faults: int,
    agents: int,
    seed: int,
    kinds: tuple[str, ...] = FAULT_KINDS,
    outage_scale: float = 1.0,
) -> list[Step]:
    """``faults`` faults and the operator actions over ``seconds``, sorted by time.

    Faults sit in equal slots with seeded jitter, one at a time (each outage ends before the
    next fault starts), so a failed request can be tied to the fault that caused it.
    ``outage_scale`` shrinks the issue's outage lengths (60 s down, 120 s partition) for short
    runs. Every kind appears once before any repeats; then kinds are drawn at random.
    """
    if faults < 1 or agents < 1 or seconds <= 0:
        raise ValueError("a schedule needs seconds > 0, faults >= 1 and agents >= 1")
    rng = random.Random(seed)
    order = list(kinds)
    rng.shuffle(order)
    while len(order) < faults:
        order.append(rng.choice(kinds))
    slot = seconds / faults
    steps: list[Step] = []
    for i, kind in enumerate(order[:faults]):
        duration = min(_duration(kind, outage_scale, rng), slot * 0.6)
        at = i * slot + rng.uniform(0.05, 0.3) * slot
        target = ""
        if kind in (AGENT_KILL_SWAP, AGENT_KILL_DOWNLOAD, PARTITION, DISK_FULL):
            target = str(rng.randrange(agents))
        steps.append(Step(round(at, 1), kind, target, round(duration, 1)))
    actions = ["rollout", "rollback"] + ["redeploy"] * max(1, faults // 3)
    for i, action in enumerate(actions):
        at = (i + 0.5) * seconds / len(actions) + rng.uniform(-0.1, 0.1) * seconds / len(actions)
        steps.append(Step(round(max(0.0, at), 1), action))
    return sorted(steps, key=lambda s: (s.at_s, s.kind))


def describe(steps: list[Step], seed: int) -> str:
    """The schedule as printed before the run (and kept in the results file)."""
    lines = [f"fault schedule (seed {seed}):"]
    lines += ["  " + s.line() for s in steps]
    lines += [f"  not done: {k}: {why}" for k, why in NOT_DONE.items()]
    return "\n".join(lines)
