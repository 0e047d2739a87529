"""The rollout read model of ``/metrics`` and the dashboard's rollout page (moved out of the
telemetry store), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import Engine

from controller.db.repository import Repository
from controller.db.rollout_store import RolloutStore
from controller.records import Rollout, RolloutSpec, RolloutState, Target, TargetStatus

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


def rollout(rid: str, state: RolloutState, at: datetime, targets: tuple[Target, ...]) -> Rollout:
    spec = RolloutSpec(model="det", version=rid)
    return Rollout(rid, spec, state, at, at, current_wave=1, waves=2, targets=targets)


def test_rollouts_are_counted_per_state_and_per_wave(engine: Engine) -> None:
    repo = Repository(engine)
    assert repo.rollouts_by_state() == {}
    assert repo.rollout_progress() == []
    store = RolloutStore(engine)
    older = (
        Target("gw-1", 0, TargetStatus.SUCCEEDED),
        Target("gw-2", 1, TargetStatus.IN_PROGRESS),
        Target("gw-3", 1),
    )
    store.create(rollout("ro-1", RolloutState.RUNNING, T0, older), [])
    newer = (Target("gw-4", 0, TargetStatus.SUCCEEDED),)
    store.create(rollout("ro-2", RolloutState.SUCCEEDED, T0 + timedelta(minutes=1), newer), [])

    assert repo.rollouts_by_state() == {"running": 1, "succeeded": 1}
    progress = repo.rollout_progress()
    assert [(p["id"], p["state"], p["current_wave"], p["waves"]) for p in progress] == [
        ("ro-2", "succeeded", 1, 2),
        ("ro-1", "running", 1, 2),
    ]
    assert progress[1]["model"] == "det"
    assert progress[1]["version"] == "ro-1"
    assert progress[1]["targets"] == {0: {"succeeded": 1}, 1: {"in_progress": 1, "pending": 1}}
    assert progress[0]["targets"] == {0: {"succeeded": 1}}
    assert [p["id"] for p in repo.rollout_progress(limit=1)] == ["ro-2"]
