"""Agent rollouts in the state machine with a fake clock: a device passes on its confirmed
update, fails on rolled_back/failed/refused for this release (a stale report of an earlier
update does not count), the first failure stops the rollout and withdraws the order from the
devices that have not confirmed, and the controller refuses to "roll back" an agent rollout."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from controller.errors import Conflict
from controller.rollouts import machine
from controller.rollouts.agent_gate import AgentObservation
from controller.rollouts.machine import Observation
from controller.rollouts.model import (
    Baseline,
    Operation,
    Rollout,
    RolloutSpec,
    RolloutState,
    Strategy,
    Target,
    TargetStatus,
)
from controller.rollouts.waves import parse_waves, plan_waves
from shared.agent_releases import AgentUpdatePhase, AgentUpdateStatus
from shared.messages import SlotPhase, SlotStatus

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def make(n: int) -> Rollout:
    spec = RolloutSpec(
        kind="agent",
        model="jetfleet-agent",
        version="0.3.0",
        strategy=Strategy(waves="1,50%,100%", device_timeout_s=60),
    )
    ids = [f"gw-{i:02d}" for i in range(n)]
    planned = plan_waves(ids, parse_waves(spec.strategy.waves))
    targets = tuple(Target(d, w) for w, wave in enumerate(planned) for d in wave)
    return Rollout("ro-a", spec, RolloutState.PENDING, T0, T0, waves=len(planned), targets=targets)


def apply(r: Rollout, step: machine.Step) -> Rollout:
    targets = []
    for t in machine.current_targets(r, step):
        if t.device_id in step.start:
            t = replace(t, generation=5, previous={"agent": "0.2.0"})
        targets.append(t)
    return replace(r, state=step.state, current_wave=step.current_wave, targets=tuple(targets))


def seen(
    phase: AgentUpdatePhase, version: str = "0.3.0", at: datetime = T0, serving: bool = True
) -> Observation:
    slot = SlotStatus(
        name="det",
        phase=SlotPhase.SERVING if serving else SlotPhase.BUILDING,
        active_version="1",
        updated_at=at,
    )
    running = version if phase == "confirmed" else "0.2.0"
    update = AgentUpdateStatus(version=version, phase=phase, previous="0.2.0", at=at)
    return Observation(observed_generation=5, agent=AgentObservation(5, running, update, (slot,)))


def test_waves_advance_on_confirmed_updates() -> None:
    r = apply(make(4), machine.advance(make(4), {}, T0))
    assert [t.device_id for t in r.targets if t.status is TargetStatus.IN_PROGRESS] == ["gw-00"]
    # confirmed but a slot still loading: not yet
    step = machine.advance(r, {"gw-00": seen("confirmed", serving=False)}, T0)
    assert step.start == []
    r = apply(r, machine.advance(r, {"gw-00": seen("confirmed")}, T0))
    assert r.targets[0].status is TargetStatus.SUCCEEDED
    assert [t.device_id for t in r.targets if t.status is TargetStatus.IN_PROGRESS] == ["gw-01"]


@pytest.mark.parametrize("phase", ["rolled_back", "failed", "refused"])
def test_first_failure_stops_the_rollout_and_withdraws_unconfirmed_orders(
    phase: AgentUpdatePhase,
) -> None:
    r = make(4)
    r = apply(r, machine.advance(r, {}, T0))
    r = apply(r, machine.advance(r, {"gw-00": seen("confirmed")}, T0))
    obs = {"gw-01": seen(phase)}
    step = machine.advance(r, obs, T0 + timedelta(seconds=1))
    assert step.state is RolloutState.FAILED
    assert "1 device(s) failed (abort at 1)" in (step.reason or "")
    assert [t.device_id for t in step.revert] == ["gw-01"]
    final = {t.device_id: t for t in machine.current_targets(r, step)}
    assert final["gw-00"].status is TargetStatus.SUCCEEDED
    assert final["gw-01"].status is TargetStatus.FAILED
    assert {final[d].status for d in ("gw-02", "gw-03")} == {TargetStatus.SKIPPED}
    assert step.start == []


def test_a_stale_failure_of_an_earlier_update_does_not_count() -> None:
    r = make(1)
    r = apply(r, machine.advance(r, {}, T0))
    r = replace(r, targets=(replace(r.targets[0], started_at=T0),))
    old = seen("rolled_back", at=T0 - timedelta(days=1))
    assert old.agent is not None
    stale = replace(old, agent=replace(old.agent, observed_generation=4))
    step = machine.advance(r, {"gw-00": stale}, T0 + timedelta(seconds=1))
    assert step.state is RolloutState.RUNNING
    other = seen("rolled_back", version="0.2.9")
    step = machine.advance(r, {"gw-00": other}, T0 + timedelta(seconds=1))
    assert step.state is RolloutState.RUNNING
    late = machine.advance(r, {}, T0 + timedelta(seconds=61))
    assert late.state is RolloutState.FAILED
    assert "no update to agent 0.3.0 reported within 60 s" in (
        machine.current_targets(r, late)[0].reason or ""
    )


def test_rollback_is_refused_for_agent_rollouts() -> None:
    r = apply(make(2), machine.advance(make(2), {}, T0))
    with pytest.raises(Conflict, match="is an agent rollout"):
        machine.allowed(r, Operation.ROLLBACK)
    machine.allowed(r, Operation.ABORT)


def test_a_confirmed_device_is_held_to_the_inference_health_gate() -> None:
    r = make(2)
    r = apply(r, machine.advance(r, {}, T0))
    r = apply(r, machine.advance(r, {"gw-00": seen("confirmed")}, T0))
    assert r.targets[0].status is TargetStatus.SUCCEEDED  # no soak: passes at once
    strategy = r.spec.strategy.model_copy(update={"soak_s": 30})
    soaking = r.spec.model_copy(update={"strategy": strategy})
    r = apply(make(2), machine.advance(make(2), {}, T0))
    r = replace(r, spec=soaking)
    r = apply(r, machine.advance(r, {"gw-00": seen("confirmed")}, T0))
    assert r.targets[0].validated_at == T0
    sick = replace(seen("confirmed"), health=Baseline(requests=100, errors=30))
    step = machine.advance(r, {"gw-00": sick}, T0 + timedelta(seconds=5))
    failed = machine.current_targets(r, step)[0]
    assert failed.status is TargetStatus.FAILED
    assert "error rate 30.0% > 5%" in (failed.reason or "")
    assert step.state is RolloutState.FAILED
