"""The seeded fault schedule: pure, printed before the run.

:func:`plan` spreads faults and operator actions (rollout, rollback, redeploys) over the run so
that faults overlap the actions, every kind of fault in ``kinds`` appears at least once when the
run is long enough, and the same seed always gives the same schedule.

Outages keep the issue's lengths (broker down 60 s, a link partitioned 120 s, a full state
directory 60 s; PostgreSQL down 15 s between its stop and start), times ``outage_scale`` for
short runs, and may overlap the faults after them: each fault holds a *resource* while it lasts
(:func:`resources`), and a fault starts only when what it needs is free. The broker, the
controller and PostgreSQL are one resource (``central``: one of those faults at a time, so a
failure is tied to one cause); each agent is one (its link, its disk, its process). Killing an
agent also needs ``central`` for a moment: the kill follows a deploy that must reach the agent.
So a partition of agent 1 keeps running while agent 2 is killed or the broker restarts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

BROKER_RESTART = "broker_restart"
BROKER_DOWN = "broker_down"
CONTROLLER_KILL = "controller_kill"
POSTGRESQL_RESTART = "postgresql_restart"
AGENT_KILL_SWAP = "agent_kill_mid_swap"
AGENT_KILL_DOWNLOAD = "agent_kill_mid_download"
PARTITION = "link_partition"
DISK_FULL = "state_dir_full"

FAULT_KINDS = (
    BROKER_RESTART,
    BROKER_DOWN,
    CONTROLLER_KILL,
    POSTGRESQL_RESTART,
    AGENT_KILL_SWAP,
    AGENT_KILL_DOWNLOAD,
    PARTITION,
    DISK_FULL,
)
ACTIONS = ("redeploy", "rollout", "rollback")
CENTRAL = "central"
CENTRAL_KINDS = (BROKER_RESTART, BROKER_DOWN, CONTROLLER_KILL, POSTGRESQL_RESTART)
AGENT_KINDS = (AGENT_KILL_SWAP, AGENT_KILL_DOWNLOAD, PARTITION, DISK_FULL)
KILLS = (AGENT_KILL_SWAP, AGENT_KILL_DOWNLOAD)

OUTAGE_S = {BROKER_DOWN: 60.0, PARTITION: 120.0, DISK_FULL: 60.0, POSTGRESQL_RESTART: 15.0}
"""The issue's outage lengths at scale 1.0 (PostgreSQL: stopped this long, then started)."""
HOLD_S = {BROKER_RESTART: 5.0, CONTROLLER_KILL: 10.0, AGENT_KILL_SWAP: 5.0,
          AGENT_KILL_DOWNLOAD: 5.0}  # fmt: skip
"""How long an instant fault is planned to hold its resources (it restarts what it killed)."""
SETTLE_S = 15.0
"""Quiet time on a resource after a fault on it ends, before the next one there (scaled)."""

NOT_DONE = {
    "clock_step": "stepping the clock changes it for every process on the host (no per-process "
    "clock without libfaketime or a time namespace the agent is started in); not safe on a "
    "shared machine. Not done.",
}
NOT_DONE_GIVEN_DB = (
    "the bench was given a PostgreSQL server (--db) that it does not own; restarting it would "
    "break its other users. Not done (leave --db out: the bench runs its own cluster)."
)


@dataclass(frozen=True)
class Step:
    """One scheduled thing: a fault or an operator action, ``at_s`` after the start."""

    at_s: float
    kind: str
    target: str = ""
    """Agent index (as text) for agent faults, empty otherwise."""
    duration_s: float = 0.0
    """How long an outage lasts (broker down, partition, full disk, PostgreSQL down); 0 for
    instant faults."""

    @property
    def is_fault(self) -> bool:
        return self.kind in FAULT_KINDS

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s

    def line(self) -> str:
        who = f" agent={self.target}" if self.target else ""
        lasting = (
            f" for {self.duration_s:.0f}s (until t={self.end_s:.1f}s)" if self.duration_s else ""
        )
        return f"t={self.at_s:7.1f}s  {self.kind}{who}{lasting}"


def resources(step: Step) -> tuple[str, ...]:
    """What ``step`` holds while it lasts, in the order it takes them (central first)."""
    if step.kind in CENTRAL_KINDS:
        return (CENTRAL,)
    if step.kind in KILLS:
        return (CENTRAL, f"agent-{step.target}")
    if step.kind in AGENT_KINDS:
        return (f"agent-{step.target}",)
    return ()


def _length(kind: str, scale: float) -> float:
    base = OUTAGE_S.get(kind, 0.0)
    return round(max(5.0, base * scale), 1) if base else 0.0


def held_s(kind: str, scale: float) -> float:
    """How long a fault of ``kind`` holds its resources in the plan."""
    return _length(kind, scale) or HOLD_S.get(kind, 0.0)


class _Book:
    """Busy intervals per resource."""

    def __init__(self, settle_s: float) -> None:
        self.settle_s = settle_s
        self.busy: dict[str, list[tuple[float, float]]] = {}

    def free_from(self, names: tuple[str, ...], at: float, hold: float) -> float:
        """The earliest start >= ``at`` at which every one of ``names`` is free for ``hold``
        (with the settle time around each busy interval)."""
        start = at
        moved = True
        while moved:
            moved = False
            for name in names:
                for b_start, b_end in self.busy.get(name, []):
                    if start < b_end + self.settle_s and b_start < start + hold + self.settle_s:
                        start = b_end + self.settle_s
                        moved = True
        return start

    def take(self, names: tuple[str, ...], start: float, hold: float) -> None:
        for name in names:
            self.busy.setdefault(name, []).append((start, start + hold))


def plan(
    seconds: float,
    faults: int,
    agents: int,
    seed: int,
    kinds: tuple[str, ...] = FAULT_KINDS,
    outage_scale: float = 1.0,
) -> list[Step]:
    """``faults`` faults and the operator actions over ``seconds``, sorted by time.

    Faults start in equal slots with seeded jitter; an outage keeps its full length (the
    issue's, times ``outage_scale``) and may run on while the next faults start, on other
    resources. A fault whose resources are still held (or settling) starts once they are free;
    an agent fault goes to the agent free soonest (ties: the one with the fewest faults so far,
    then seeded). Every kind appears once
    before any repeats; then kinds are drawn at random. An outage may end after ``seconds``.
    """
    if faults < 1 or agents < 1 or seconds <= 0:
        raise ValueError("a schedule needs seconds > 0, faults >= 1 and agents >= 1")
    rng = random.Random(seed)
    order = list(kinds)
    rng.shuffle(order)
    while len(order) < faults:
        order.append(rng.choice(kinds))
    slot = seconds / faults
    book = _Book(SETTLE_S * outage_scale)
    steps: list[Step] = []
    hits = {str(a): 0 for a in range(agents)}
    for i, kind in enumerate(order[:faults]):
        at = i * slot + rng.uniform(0.05, 0.3) * slot
        duration = _length(kind, outage_scale)
        hold = held_s(kind, outage_scale)
        target = ""
        if kind in AGENT_KINDS:
            choices = [str(a) for a in range(agents)]
            rng.shuffle(choices)
            target = min(
                choices,
                key=lambda a: (book.free_from(resources(Step(0, kind, a)), at, hold), hits[a]),
            )
            hits[target] += 1
        step = Step(0.0, kind, target, duration)
        start = book.free_from(resources(step), at, hold)
        book.take(resources(step), start, hold)
        steps.append(Step(round(start, 1), kind, target, duration))
    actions = ["rollout", "rollback"] + ["redeploy"] * max(1, faults // 3)
    for i, action in enumerate(actions):
        at = (i + 0.5) * seconds / len(actions) + rng.uniform(-0.1, 0.1) * seconds / len(actions)
        steps.append(Step(round(max(0.0, at), 1), action))
    return sorted(steps, key=lambda s: (s.at_s, s.kind))


def overlaps(steps: list[Step]) -> list[tuple[Step, Step]]:
    """Pairs of faults where the second starts while the first's outage still lasts."""
    faults = [s for s in steps if s.is_fault]
    return [
        (a, b)
        for i, a in enumerate(faults)
        for b in faults[i + 1 :]
        if a.duration_s and a.at_s <= b.at_s < a.end_s
    ]


def describe(steps: list[Step], seed: int, not_done: dict[str, str] | None = None) -> str:
    """The schedule as printed before the run (and kept in the results file)."""
    lines = [f"fault schedule (seed {seed}):"]
    lines += ["  " + s.line() for s in steps]
    for a, b in overlaps(steps):
        lines.append(
            f"  overlap: {b.kind}{' agent=' + b.target if b.target else ''} at t={b.at_s:.1f}s "
            f"during {a.kind}{' agent=' + a.target if a.target else ''}"
        )
    lines += [f"  not done: {k}: {why}" for k, why in (not_done or NOT_DONE).items()]
    return "\n".join(lines)
