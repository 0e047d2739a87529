"""What a device reports comes back from the database typed: its slots as ``SlotStatus`` (phases
as ``SlotPhase``) and its facts as ``DeviceFacts``, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import Engine, update

from controller.db.engine_store import EngineStoreDb
from controller.db.repository import Repository
from controller.db.schema import Device
from shared.facts import DeviceFacts, GpuFacts
from shared.hardware_class import hardware_class
from shared.messages import ReportedState, SlotPhase, SlotStatus

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
FACTS = DeviceFacts(
    hostname="gw-1",
    os="Ubuntu 22.04",
    arch="aarch64",
    tensorrt_version="10.3.0.30",
    gpu=GpuFacts(compute_capability="8.7"),
)
SERVING = SlotStatus(
    name="det",
    desired_version="2",
    active_version="2",
    phase=SlotPhase.SERVING,
    engine_key="k" * 16,
    runtime="tensorrt",
    updated_at=NOW,
)
FAILED = SlotStatus(name="pose", phase=SlotPhase.FAILED, last_error="no memory", updated_at=NOW)


def report(repo: Repository) -> None:
    repo.record_reported(
        ReportedState(
            device_id="gw-1",
            observed_generation=3,
            reported_at=NOW,
            slots=(SERVING, FAILED),
            facts=FACTS,
            agent_version="test",
        ),
        NOW,
    )


def test_reported_slots_and_facts_come_back_as_wire_models(engine: Engine) -> None:
    repo = Repository(engine)
    repo.record_contact("gw-1", NOW)
    before = repo.device("gw-1")
    assert (before.reported, before.device_facts, before.pinned_class) == ((), None, None)
    assert EngineStoreDb(engine).device_facts("gw-1") == (None, None)

    report(repo)

    device = repo.device("gw-1")
    assert device.reported == (SERVING, FAILED)
    assert device.reported[0].phase is SlotPhase.SERVING
    assert device.device_facts == FACTS
    pinned = hardware_class(FACTS)  # the first report pins the class engines are uploaded for
    assert device.pinned_class == pinned
    assert EngineStoreDb(engine).device_facts("gw-1") == (FACTS, pinned)
    assert [d.reported for d in repo.devices()] == [(SERVING, FAILED)]


def test_stored_reports_that_no_longer_validate_are_left_out(engine: Engine) -> None:
    repo = Repository(engine)
    report(repo)
    stale_slot = {"name": "old", "phase": "compiling", "updated_at": NOW.isoformat()}
    stale_facts = {"hostname": "gw-1", "arch": "aarch64"}  # no "os": an older wire model
    with engine.begin() as conn:
        conn.execute(
            update(Device)
            .where(Device.id == "gw-1")
            .values(
                reported_slots=[SERVING.model_dump(mode="json"), stale_slot],
                facts=stale_facts,
            )
        )

    device = repo.device("gw-1")
    assert device.reported == (SERVING,)
    assert device.device_facts is None
    assert EngineStoreDb(engine).device_facts("gw-1") == (None, hardware_class(FACTS))


def test_an_older_generation_reported_later_does_not_replace_a_newer_one(engine: Engine) -> None:
    """Every replica stores every report it receives, each in its own order: a replica behind
    the others writes a device's generation-2 report after another wrote generation 3. That
    stale write used to win, and if the lagging replica died before it reached the newer report
    (kill -9 mid-rollout), the device stayed at generation 2 until it reported again, and its
    rollout target timed out."""
    repo = Repository(engine)
    report(repo)  # generation 3, det serving 2
    older = SlotStatus(name="det", desired_version="2", phase=SlotPhase.DOWNLOADING, updated_at=NOW)
    later = datetime(2026, 3, 1, 12, 0, 5, tzinfo=timezone.utc)
    repo.record_reported(
        ReportedState(
            device_id="gw-1",
            observed_generation=2,
            reported_at=NOW,
            slots=(older,),
            facts=FACTS,
            agent_version="test",
        ),
        later,
    )
    device = repo.device("gw-1")
    assert device.observed_generation == 3
    assert device.reported == (SERVING, FAILED)
    assert device.last_seen == later  # the message still shows the device is alive

    newer = SERVING.model_copy(update={"desired_version": "3", "active_version": "3"})
    repo.record_reported(
        ReportedState(
            device_id="gw-1",
            observed_generation=3,
            reported_at=later,
            slots=(newer,),
            facts=FACTS,
            agent_version="test",
        ),
        later,
    )
    assert repo.device("gw-1").reported == (newer,)  # the same generation still moves on


def test_the_first_report_of_an_unknown_device_creates_it(engine: Engine) -> None:
    repo = Repository(engine)
    report(repo)
    device = repo.device("gw-1")
    assert (device.observed_generation, device.reported, device.last_seen) == (
        3,
        (SERVING, FAILED),
        NOW,
    )
