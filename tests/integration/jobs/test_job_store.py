"""The jobs table on SQLite and PostgreSQL, through the real migrations."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
from sqlalchemy import Engine

from controller.db import migrate
from controller.db.job_store import JobStore
from controller.db.repository import Repository
from controller.db.session import make_engine
from controller.db.telemetry_store import TelemetryStore
from shared.messages import Event


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    migrate.upgrade(db_url)
    made = make_engine(db_url)
    yield made
    made.dispose()


def event(device: str, event_id: str, kind: str, data: dict[str, object]) -> Event:
    return Event(
        device_id=device,
        event_id=event_id,
        ts=datetime.now(timezone.utc),
        kind=kind,  # type: ignore[arg-type]
        data=data,
    )


def test_a_job_moves_pending_running_finished_once(engine: Engine) -> None:
    repo = Repository(engine)
    repo.record_contact("gw-1", datetime.now(timezone.utc))
    store = JobStore(engine)
    store.add("j-1", "profile", "gw-1", "det", None, {"kind": "profile", "job_id": "j-1"})
    store.add("j-2", "tune", "gw-1", "det", "2", {"kind": "tune", "job_id": "j-2"})

    assert [j.id for j in store.unfinished(["gw-1"])] == ["j-1", "j-2"]
    assert store.add_progress("j-1", {"event_id": "e1", "step": 1})
    assert not store.add_progress("j-1", {"event_id": "e1", "step": 1}), "replayed event"
    assert store.get("j-1").status == "running"

    store.set_version("j-1", "1")
    done = store.finish("j-1", "succeeded", {"job_id": "j-1"}, None)
    assert done is not None
    assert done.finished_at is not None
    assert store.finish("j-1", "failed", None, "late duplicate") is None
    assert not store.add_progress("j-1", {"event_id": "e2"})
    assert [j.id for j in store.unfinished()] == ["j-2"]
    assert [j.id for j in store.latest_profiles("det", "1")] == ["j-1"]
    assert store.get("j-1").progress == [{"event_id": "e1", "step": 1}]


def test_job_events_are_read_back_in_order_after_a_row(engine: Engine) -> None:
    telemetry = TelemetryStore(engine)
    now = datetime.now(timezone.utc)
    for one in (
        event("gw-1", "a", "job_progress", {"job_id": "j-1"}),
        event("gw-1", "b", "swap", {}),
        event("gw-2", "c", "job_result", {"job_id": "j-9"}),
        event("gw-1", "d", "job_result", {"job_id": "j-1"}),
    ):
        telemetry.write_batch([], [one], now)
    store = JobStore(engine)

    found = store.job_events(["gw-1"], 0)

    assert [(e.event_id, e.kind) for e in found] == [("a", "job_progress"), ("d", "job_result")]
    assert store.job_events(["gw-1"], found[0].row_id)[0].event_id == "d"
    assert store.job_events([], 0) == []
