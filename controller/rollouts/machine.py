"""The rollout state machine (pure): from a stored rollout, what devices report and a clock,
decide every transition. No I/O: the loop (:mod:`controller.rollouts.loop`) carries it out.

``pending → running ⇄ paused → succeeded | failed | aborted | rolled_back``. A running rollout
updates the lowest unfinished wave's devices (at most ``max_in_flight`` at once) and moves on
when every device of the wave succeeded or failed. A device succeeds when it serves the new
version (the engine validated on the device) and stays within the health gates for the soak
time; it fails when it reports the slot failed, breaks a gate, or stays silent past its
timeout. Reaching the failure policy's threshold aborts the rollout and, by default, rolls
every updated device back to its previous version and config.

An agent rollout (``kind`` agent) judges a device by its report of the agent update
(:mod:`controller.rollouts.agent_gate`) until it confirms, then by the same health gates and
soak. Its first failed device (by default) stops it: ``failed``, the devices not started
skipped, the order withdrawn from every device that has not confirmed (:func:`stop_agent`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from controller.errors import Conflict
from controller.rollouts import agent_gate
from controller.rollouts.agent_gate import AgentObservation
from controller.rollouts.model import (
    AuditEntry,
    Baseline,
    Operation,
    Rollout,
    RolloutState,
    Target,
    TargetStatus,
)
from shared.messages import SlotPhase, SlotStatus

LOOP = "rollout-loop"
"""The actor of every transition the loop decides by itself."""

_ALLOWED: dict[Operation, frozenset[RolloutState]] = {
    Operation.PAUSE: frozenset({RolloutState.PENDING, RolloutState.RUNNING}),
    Operation.RESUME: frozenset({RolloutState.PAUSED}),
    Operation.ABORT: frozenset({RolloutState.PENDING, RolloutState.RUNNING, RolloutState.PAUSED}),
    Operation.ROLLBACK: frozenset(set(RolloutState) - {RolloutState.ROLLED_BACK}),
    Operation.RETRY: frozenset({RolloutState.RUNNING, RolloutState.PAUSED, RolloutState.FAILED}),
}


@dataclass(frozen=True)
class Observation:
    """What the controller knows of one device now (from its ReportedState and telemetry)."""

    observed_generation: int | None = None
    phase: SlotPhase | None = None
    active_version: str | None = None
    desired_version: str | None = None
    last_error: str | None = None
    health: Baseline | None = None
    """The model's health on the new version since the device validated it (an agent
    rollout's: every model's, since the device confirmed the new agent)."""
    agent: AgentObservation | None = None
    """What the device reports of its agent (agent rollouts only)."""

    @classmethod
    def of(
        cls, observed_generation: int | None, slot: SlotStatus | None, health: Baseline | None
    ) -> Observation:
        """What the device's report says of the rollout's slot (None: it reports no such slot)."""
        if slot is None:
            return cls(observed_generation=observed_generation, health=health)
        return cls(
            observed_generation=observed_generation,
            phase=slot.phase,
            active_version=slot.active_version,
            desired_version=slot.desired_version,
            last_error=slot.last_error,
            health=health,
        )


@dataclass
class Step:
    """What one evaluation decided; the loop persists and carries it out."""

    state: RolloutState
    reason: str | None
    current_wave: int
    changed: dict[str, Target] = field(default_factory=dict)
    start: list[str] = field(default_factory=list)
    """Devices to update now (their desired state gets the new version)."""
    revert: list[Target] = field(default_factory=list)
    """Updated devices whose previous slot must be restored (a rollback)."""
    audit: list[AuditEntry] = field(default_factory=list)

    def set_target(self, old: Target, new: Target, now: datetime, actor: str) -> None:
        self.changed[new.device_id] = new
        if old.status != new.status:
            self.audit.append(
                AuditEntry(
                    now,
                    actor,
                    "target",
                    old.status.value,
                    new.status.value,
                    new.reason or "",
                    new.device_id,
                )
            )

    def set_state(self, old: RolloutState, new: RolloutState, now: datetime, actor: str) -> None:
        if old != new:
            self.audit.append(
                AuditEntry(now, actor, "rollout", old.value, new.value, self.reason or "")
            )
        self.state = new


def allowed(rollout: Rollout, op: Operation) -> None:
    """Raise :class:`Conflict` (naming the states it needs) unless ``op`` applies now."""
    states = _ALLOWED[op]
    if rollout.state not in states:
        names = ", ".join(sorted(s.value for s in states))
        raise Conflict(
            f"cannot {op.value} rollout {rollout.id}: it is {rollout.state.value} "
            f"({op.value} needs {names})"
        )
    if op is Operation.ROLLBACK and rollout.spec.kind == "agent":
        raise Conflict(
            f"rollout {rollout.id} is an agent rollout: the controller does not take agent "
            "releases back (a device that fails to confirm switches back by itself); start a "
            "rollout of the release you want with --allow-downgrade"
        )
    if op is Operation.RETRY and not any(t.status is TargetStatus.FAILED for t in rollout.targets):
        raise Conflict(f"rollout {rollout.id} has no failed device to retry")


def current_targets(rollout: Rollout, step: Step) -> list[Target]:
    """The rollout's targets with ``step``'s changes applied."""
    return [step.changed.get(t.device_id, t) for t in rollout.targets]


def judge(target: Target, obs: Observation | None, rollout: Rollout, now: datetime) -> Target:
    """The in-progress ``target`` after looking at ``obs`` (unchanged while undecided)."""
    spec = rollout.spec
    generation, started_at = target.generation, target.started_at
    if generation is None or started_at is None:
        return target
    validated_at = target.validated_at
    if spec.kind == "agent" and validated_at is None:
        agent = obs.agent if obs is not None else None
        decided, why = agent_gate.verdict(agent, spec.version, generation, started_at)
        if decided == "failed":
            return _finish(target, TargetStatus.FAILED, why, now)
        if decided == "confirmed":
            validated_at = now
            target = replace(target, validated_at=now)
        elif now >= started_at + timedelta(seconds=spec.strategy.device_timeout_s):
            timeout = spec.strategy.device_timeout_s
            why = agent_gate.waiting_reason(agent, spec.version, timeout)
            return _finish(target, TargetStatus.FAILED, why, now)
        else:
            return target
    if validated_at is None and obs is not None:
        current = (obs.observed_generation or -1) >= generation
        failed = obs.phase is SlotPhase.FAILED
        if current and failed and obs.desired_version in (None, spec.version):
            why = obs.last_error or "no error given"
            return _finish(target, TargetStatus.FAILED, f"validation failed: {why}", now)
        if current and obs.phase is SlotPhase.ROLLED_BACK:
            why = obs.last_error or "no error given"
            return _finish(target, TargetStatus.FAILED, f"the device rolled back: {why}", now)
        if current and obs.phase is SlotPhase.SERVING and obs.active_version == spec.version:
            validated_at = now
            target = replace(target, validated_at=now)
    if validated_at is None:
        timeout = spec.strategy.device_timeout_s
        if now >= started_at + timedelta(seconds=timeout):
            if obs is None or (obs.observed_generation or -1) < generation:
                why = f"silent: no report of generation {target.generation} within {timeout:g} s"
            else:
                phase = obs.phase.value if obs.phase is not None else None
                why = f"not serving {spec.version} within {timeout:g} s (phase {phase})"
            return _finish(target, TargetStatus.FAILED, why, now)
        return target
    broken = _gate_problem(target, obs.health if obs is not None else None, rollout)
    if broken is not None:
        return _finish(target, TargetStatus.FAILED, broken, now)
    if now >= validated_at + timedelta(seconds=spec.strategy.soak_s):
        return _finish(target, TargetStatus.SUCCEEDED, "serving and healthy", now)
    return target


def _gate_problem(target: Target, health: Baseline | None, rollout: Rollout) -> str | None:
    gates = rollout.spec.gates
    if health is None or health.requests < gates.min_requests:
        return None
    rate = health.error_percent or 0.0
    if rate > gates.max_error_percent:
        return (
            f"error rate {rate:.1f}% > {gates.max_error_percent:g}% "
            f"({health.errors} of {health.requests} requests)"
        )
    base = target.baseline.p99_ms if target.baseline is not None else None
    if base and health.p99_ms is not None and health.p99_ms > gates.max_p99_ratio * base:
        return f"p99 {health.p99_ms:.1f} ms > {gates.max_p99_ratio:g}x baseline {base:.1f} ms"
    return None


def _finish(target: Target, status: TargetStatus, reason: str, now: datetime) -> Target:
    return replace(target, status=status, reason=reason, finished_at=now)


def advance(rollout: Rollout, observations: Mapping[str, Observation], now: datetime) -> Step:
    """Evaluate a pending, running or paused rollout once."""
    step = Step(rollout.state, rollout.reason, rollout.current_wave)
    if rollout.state is RolloutState.PENDING:
        step.reason = "started"
        step.set_state(rollout.state, RolloutState.RUNNING, now, LOOP)
    for target in rollout.targets:
        if target.status is not TargetStatus.IN_PROGRESS:
            continue
        if target.generation is None:
            step.start.append(target.device_id)  # updated before a restart: publish again
            continue
        judged = judge(target, observations.get(target.device_id), rollout, now)
        if judged != target:
            step.set_target(target, judged, now, LOOP)
    targets = current_targets(rollout, step)
    breach = _breach(rollout, targets)
    if breach is not None:
        step.reason = breach
        if rollout.spec.kind == "agent":
            return stop_agent(rollout, step, now, LOOP)
        if rollout.spec.policy.rollback:
            return rollback(rollout, step, now, LOOP)
        return abort(rollout, step, now, LOOP)
    open_targets = [t for t in targets if not t.status.terminal]
    if not open_targets:
        failed = sum(t.status is TargetStatus.FAILED for t in targets)
        step.reason = f"{failed} device(s) failed" if failed else "every device succeeded"
        final = RolloutState.FAILED if failed else RolloutState.SUCCEEDED
        step.set_state(step.state, final, now, LOOP)
        return step
    wave = min(t.wave for t in open_targets)
    step.current_wave = wave
    if step.state is not RolloutState.RUNNING:
        return step
    in_flight = sum(t.status is TargetStatus.IN_PROGRESS for t in targets)
    room = (rollout.spec.strategy.max_in_flight or len(targets)) - in_flight
    for target in targets:
        if room <= 0:
            break
        if target.wave == wave and target.status is TargetStatus.PENDING:
            started = replace(target, status=TargetStatus.IN_PROGRESS, started_at=now)
            step.set_target(
                target, replace(started, reason=f"updating (wave {wave + 1})"), now, LOOP
            )
            step.start.append(target.device_id)
            room -= 1
    return step


def _breach(rollout: Rollout, targets: Sequence[Target]) -> str | None:
    policy = rollout.spec.policy
    failed = sum(t.status is TargetStatus.FAILED for t in targets)
    counted = sum(t.status is not TargetStatus.SKIPPED for t in targets)
    if failed == 0:
        return None
    max_failures = policy.max_failures
    if rollout.spec.kind == "agent" and max_failures is None:
        max_failures = None if policy.max_failure_percent is not None else 1
    if max_failures is not None and failed >= max_failures:
        return f"{failed} device(s) failed (abort at {max_failures})"
    percent = 100.0 * failed / max(counted, 1)
    if policy.max_failure_percent is not None and percent >= policy.max_failure_percent:
        return f"{percent:.1f}% of devices failed (abort at {policy.max_failure_percent:g}%)"
    return None


def abort(rollout: Rollout, step: Step, now: datetime, actor: str) -> Step:
    """Stop: devices not started are skipped; updated ones keep the new desired version."""
    for target in current_targets(rollout, step):
        if target.status is TargetStatus.PENDING:
            new = replace(target, status=TargetStatus.SKIPPED, reason="rollout aborted")
            step.set_target(target, new, now, actor)
        elif target.status is TargetStatus.IN_PROGRESS:
            why = "rollout aborted while updating; the device keeps the new desired version"
            step.set_target(target, _finish(target, TargetStatus.SKIPPED, why, now), now, actor)
    step.set_state(step.state, RolloutState.ABORTED, now, actor)
    return step


def stop_agent(rollout: Rollout, step: Step, now: datetime, actor: str) -> Step:
    """An agent rollout's stop (failed): devices not started are skipped, and every device
    that has not confirmed the release loses its order (``revert``), so the fleet stays on the
    release it runs; devices that confirmed keep the new release."""
    for target in current_targets(rollout, step):
        if target.status is TargetStatus.PENDING:
            new = replace(target, status=TargetStatus.SKIPPED, reason="rollout stopped")
            step.set_target(target, new, now, actor)
        elif target.status is TargetStatus.IN_PROGRESS and target.validated_at is not None:
            why = "rollout stopped; the device confirmed the new release and keeps it"
            step.set_target(target, _finish(target, TargetStatus.SKIPPED, why, now), now, actor)
        elif target.status is TargetStatus.IN_PROGRESS:
            step.revert.append(target)
            why = "rollout stopped while updating; the order was withdrawn"
            step.set_target(target, _finish(target, TargetStatus.SKIPPED, why, now), now, actor)
        elif target.status is TargetStatus.FAILED and target.updated:
            step.revert.append(target)
    step.set_state(step.state, RolloutState.FAILED, now, actor)
    return step


def rollback(rollout: Rollout, step: Step, now: datetime, actor: str) -> Step:
    """Undo: every updated device gets its previous slot back; the rest are skipped."""
    for target in current_targets(rollout, step):
        if target.updated and target.status is not TargetStatus.ROLLED_BACK:
            step.revert.append(target)
            if target.status is TargetStatus.FAILED:
                new = replace(target, reason=f"{target.reason}; previous version restored")
            else:
                why = "previous version and config restored"
                new = _finish(target, TargetStatus.ROLLED_BACK, why, now)
            step.set_target(target, new, now, actor)
        elif target.status is TargetStatus.PENDING:
            new = replace(target, status=TargetStatus.SKIPPED, reason="rollout rolled back")
            step.set_target(target, new, now, actor)
    step.set_state(step.state, RolloutState.ROLLED_BACK, now, actor)
    return step


def apply_op(rollout: Rollout, op: Operation, now: datetime, actor: str) -> Step:
    """Carry out an operator's request (checked with :func:`allowed` first)."""
    allowed(rollout, op)
    step = Step(rollout.state, f"{op.value} requested by {actor}", rollout.current_wave)
    step.audit.append(AuditEntry(now, actor, "op", rollout.state.value, None, op.value, None))
    if op is Operation.PAUSE:
        step.set_state(rollout.state, RolloutState.PAUSED, now, actor)
    elif op is Operation.RESUME:
        step.set_state(rollout.state, RolloutState.RUNNING, now, actor)
    elif op is Operation.ABORT:
        abort(rollout, step, now, actor)
    elif op is Operation.ROLLBACK:
        rollback(rollout, step, now, actor)
    else:
        for target in rollout.targets:
            if target.status is TargetStatus.FAILED:
                fresh = replace(
                    target,
                    status=TargetStatus.PENDING,
                    reason=f"retry after: {target.reason}",
                    generation=None,
                    started_at=None,
                    validated_at=None,
                    finished_at=None,
                )
                step.set_target(target, fresh, now, actor)
        step.set_state(rollout.state, RolloutState.RUNNING, now, actor)
    return step
