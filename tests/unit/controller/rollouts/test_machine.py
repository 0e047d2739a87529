"""The rollout state machine with a fake clock: waves, gates, timeouts, thresholds, operations."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from controller.errors import Conflict
from controller.rollouts import machine
from controller.rollouts.machine import Observation
from controller.rollouts.model import (
    Baseline,
    FailurePolicy,
    Gates,
    Operation,
    Rollout,
    RolloutSpec,
    RolloutState,
    Strategy,
    Target,
    TargetStatus,
)
from controller.rollouts.waves import parse_waves, plan_waves
from shared.messages import SlotPhase, SlotStatus

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def tick(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


def make(
    n: int,
    waves: str = "1,50%,100%",
    soak_s: float = 0.0,
    policy: FailurePolicy | None = None,
    gates: Gates | None = None,
) -> Rollout:
    spec = RolloutSpec(
        model="det",
        version="2",
        strategy=Strategy(waves=waves, device_timeout_s=60, soak_s=soak_s),
        policy=policy or FailurePolicy(),
        gates=gates or Gates(),
    )
    ids = [f"gw-{i:02d}" for i in range(n)]
    planned = plan_waves(ids, parse_waves(waves))
    targets = tuple(Target(d, w) for w, wave in enumerate(planned) for d in wave)
    return Rollout("ro-1", spec, RolloutState.PENDING, T0, T0, waves=len(planned), targets=targets)


def apply(r: Rollout, step: machine.Step) -> Rollout:
    """What the loop would store, with a generation published to every started device."""
    targets = []
    for t in machine.current_targets(r, step):
        if t.device_id in step.start:
            t = replace(t, generation=5, previous={"slot": None})
        targets.append(t)
    return replace(
        r,
        state=step.state,
        current_wave=step.current_wave,
        reason=step.reason,
        targets=tuple(targets),
    )


SERVING = Observation(observed_generation=5, phase=SlotPhase.SERVING, active_version="2")
FAILED = Observation(
    observed_generation=5,
    phase=SlotPhase.FAILED,
    desired_version="2",
    last_error="engine build failed",
)


def reported(phase: SlotPhase, error: str | None = None) -> SlotStatus:
    """The rollout's slot as a device reports it."""
    return SlotStatus(name="det", desired_version="2", phase=phase, last_error=error, updated_at=T0)


def statuses(r: Rollout) -> dict[str, str]:
    return {t.device_id: t.status.value for t in r.targets}


def test_waves_are_cumulative_with_canaries_first() -> None:
    ids = [f"d{i}" for i in range(20)]
    waves = plan_waves(ids, parse_waves("1,10%,50%,100%"), canary=["d7"])
    assert [len(w) for w in waves] == [1, 1, 8, 10]
    assert waves[0] == ["d7"]
    assert sorted(d for wave in waves for d in wave) == sorted(ids)
    assert [len(w) for w in plan_waves(ids, parse_waves("5"))] == [5, 15]


@pytest.mark.parametrize("bad", ["0", "10%%", "150%", "1.5", "x"])
def test_bad_waves_are_refused_naming_the_step(bad: str) -> None:
    with pytest.raises(Exception, match="invalid wave"):
        parse_waves(bad)


def test_a_rollout_advances_wave_by_wave_to_success() -> None:
    clock = Clock()
    r = make(4)  # waves: 1, 1 (50% = 2 cumulative), 2
    step = machine.advance(r, {}, clock.now)
    assert step.state is RolloutState.RUNNING
    assert step.start == ["gw-00"]
    r = apply(r, step)
    # the next wave does not start while the first is unfinished
    step = machine.advance(r, {}, clock.tick(1))
    assert step.start == []
    r = apply(r, step)
    step = machine.advance(r, {"gw-00": SERVING}, clock.tick(1))
    assert step.changed["gw-00"].status is TargetStatus.SUCCEEDED
    assert step.start == ["gw-01"]
    r = apply(r, step)
    r = apply(r, machine.advance(r, {"gw-01": SERVING}, clock.tick(1)))
    assert sorted(t.device_id for t in r.targets if t.status is TargetStatus.IN_PROGRESS) == [
        "gw-02",
        "gw-03",
    ]
    obs = dict.fromkeys(("gw-02", "gw-03"), SERVING)
    step = machine.advance(r, obs, clock.tick(1))
    r = apply(r, step)
    r = apply(r, machine.advance(r, obs, clock.tick(1)))
    assert r.state is RolloutState.SUCCEEDED
    assert set(statuses(r).values()) == {"succeeded"}


def test_max_in_flight_limits_devices_updating_at_once() -> None:
    r = make(6, waves="100%")
    r = replace(
        r, spec=r.spec.model_copy(update={"strategy": Strategy(waves="100%", max_in_flight=2)})
    )
    step = machine.advance(r, {}, T0)
    assert len(step.start) == 2


def test_soak_and_health_gates_judge_against_the_device_baseline() -> None:
    clock = Clock()
    r = make(1, waves="100%", soak_s=30, gates=Gates(max_p99_ratio=1.5, min_requests=10))
    r = apply(r, machine.advance(r, {}, clock.now))
    r = replace(r, targets=(replace(r.targets[0], baseline=Baseline(100, 0, 10.0)),))
    r = apply(r, machine.advance(r, {"gw-00": SERVING}, clock.tick(1)))
    assert r.targets[0].validated_at == clock.now
    assert r.targets[0].status is TargetStatus.IN_PROGRESS  # soaking
    healthy = replace(SERVING, health=Baseline(50, 0, 12.0))
    r = apply(r, machine.advance(r, {"gw-00": healthy}, clock.tick(10)))
    assert r.targets[0].status is TargetStatus.IN_PROGRESS
    slow = replace(SERVING, health=Baseline(80, 0, 16.0))
    r = apply(r, machine.advance(r, {"gw-00": slow}, clock.tick(10)))
    assert r.targets[0].status is TargetStatus.FAILED
    assert "p99 16.0 ms > 1.5x baseline 10.0 ms" in (r.targets[0].reason or "")


def test_error_rate_gate_and_success_after_soak() -> None:
    clock = Clock()
    r = make(2, waves="100%", soak_s=30)
    r = apply(r, machine.advance(r, {}, clock.now))
    r = apply(r, machine.advance(r, {"gw-00": SERVING, "gw-01": SERVING}, clock.tick(1)))
    obs = {
        "gw-00": replace(SERVING, health=Baseline(100, 10, None)),
        "gw-01": replace(SERVING, health=Baseline(100, 1, None)),
    }
    r = apply(r, machine.advance(r, obs, clock.tick(31)))
    assert statuses(r) == {"gw-00": "failed", "gw-01": "succeeded"}
    assert "error rate 10.0% > 5%" in (r.targets[0].reason or "")
    assert r.state is RolloutState.FAILED


def test_silent_device_fails_at_its_timeout() -> None:
    clock = Clock()
    r = make(1, waves="100%")
    r = apply(r, machine.advance(r, {}, clock.now))
    r = apply(r, machine.advance(r, {}, clock.tick(59)))
    assert r.targets[0].status is TargetStatus.IN_PROGRESS
    r = apply(r, machine.advance(r, {}, clock.tick(2)))
    assert r.targets[0].status is TargetStatus.FAILED
    assert (r.targets[0].reason or "").startswith("silent")


def test_threshold_aborts_and_rolls_back_updated_devices() -> None:
    clock = Clock()
    r = make(10, waves="100%", policy=FailurePolicy(max_failures=2))
    r = replace(
        r, spec=r.spec.model_copy(update={"strategy": Strategy(waves="100%", max_in_flight=5)})
    )
    r = apply(r, machine.advance(r, {}, clock.now))
    obs = {"gw-00": FAILED, "gw-01": FAILED, "gw-02": SERVING}
    step = machine.advance(r, obs, clock.tick(1))
    assert step.state is RolloutState.ROLLED_BACK
    assert "2 device(s) failed (abort at 2)" in (step.reason or "")
    reverted = sorted(t.device_id for t in step.revert)
    assert reverted == ["gw-00", "gw-01", "gw-02", "gw-03", "gw-04"]
    r = apply(r, step)
    s = statuses(r)
    assert [s[f"gw-0{i}"] for i in range(5)] == [
        "failed",
        "failed",
        "rolled_back",
        "rolled_back",
        "rolled_back",
    ]
    assert {s[f"gw-0{i}"] for i in range(5, 10)} == {"skipped"}
    kinds = {(e.kind, e.to_state) for e in step.audit}
    assert ("rollout", "rolled_back") in kinds


def test_threshold_without_rollback_aborts() -> None:
    r = make(4, waves="100%", policy=FailurePolicy(max_failure_percent=25, rollback=False))
    r = apply(r, machine.advance(r, {}, T0))
    step = machine.advance(r, {"gw-00": FAILED}, T0 + timedelta(seconds=1))
    assert step.state is RolloutState.ABORTED
    assert step.revert == []


def test_operations_pause_resume_retry_and_refusals() -> None:
    clock = Clock()
    r = make(2, waves="100%")
    r = apply(r, machine.advance(r, {}, clock.now))
    r = apply(r, machine.apply_op(r, Operation.PAUSE, clock.tick(1), "alice"))
    assert r.state is RolloutState.PAUSED
    with pytest.raises(Conflict, match="cannot pause rollout ro-1: it is paused"):
        machine.allowed(r, Operation.PAUSE)
    # paused: devices updating are still judged, none is started
    r = apply(r, machine.advance(r, {"gw-00": FAILED, "gw-01": SERVING}, clock.tick(1)))
    assert statuses(r) == {"gw-00": "failed", "gw-01": "succeeded"}
    assert r.state is RolloutState.FAILED
    step = machine.apply_op(r, Operation.RETRY, clock.tick(1), "alice")
    assert step.state is RolloutState.RUNNING
    assert step.audit[0].actor == "alice"
    r = apply(r, step)
    assert statuses(r)["gw-00"] == "pending"
    assert r.targets[0].previous == {"slot": None}  # the rollback target is kept
    r = apply(r, machine.advance(r, {}, clock.tick(1)))
    r = apply(r, machine.advance(r, {"gw-00": SERVING}, clock.tick(1)))
    assert r.state is RolloutState.SUCCEEDED
    with pytest.raises(Conflict, match="cannot retry rollout ro-1: it is succeeded"):
        machine.allowed(r, Operation.RETRY)
    step = machine.apply_op(r, Operation.ROLLBACK, clock.tick(1), "bob")
    assert step.state is RolloutState.ROLLED_BACK
    assert len(step.revert) == 2


def test_a_device_report_judges_its_target_by_the_reported_phase() -> None:
    clock = Clock()
    r = apply(make(3, waves="100%"), machine.advance(make(3, waves="100%"), {}, clock.now))
    obs = {
        "gw-00": Observation.of(5, reported(SlotPhase.ROLLED_BACK, "validation failed"), None),
        "gw-01": Observation.of(5, reported(SlotPhase.DOWNLOADING), None),
        "gw-02": Observation.of(5, None, None),
    }
    step = machine.advance(r, obs, clock.tick(1))
    assert step.changed["gw-00"].status is TargetStatus.FAILED
    assert step.changed["gw-00"].reason == "the device rolled back: validation failed"
    r = apply(r, step)
    step = machine.advance(r, obs, clock.tick(120))
    assert step.changed["gw-01"].reason == "not serving 2 within 60 s (phase downloading)"
    assert step.changed["gw-02"].reason == "not serving 2 within 60 s (phase None)"
