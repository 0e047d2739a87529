"""Reported states and presence stored many at once (``record_many``, one transaction per inbox
backlog) keep what one at a time gives: the newest generation wins whatever the
order replicas store them in, presence follows the last message, unknown devices are created on
first contact; and replicas storing overlapping backlogs at once do not deadlock. SQLite and the
real PostgreSQL."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

from sqlalchemy import Engine

from controller.db.repository import Repository
from shared.facts import DeviceFacts
from shared.messages import ReportedState, SlotPhase, SlotStatus, Status

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
FACTS = DeviceFacts(hostname="gw", os="Ubuntu 22.04", arch="aarch64")


def reported(device: str, generation: int, version: str) -> ReportedState:
    slot = SlotStatus(
        name="det",
        desired_version=version,
        active_version=version,
        phase=SlotPhase.SERVING,
        updated_at=NOW,
    )
    return ReportedState(
        device_id=device,
        observed_generation=generation,
        reported_at=NOW,
        slots=(slot,),
        facts=FACTS,
        agent_version="test",
    )


def serving(repo: Repository, device: str) -> tuple[int | None, str | None]:
    d = repo.device(device)
    return d.observed_generation, d.reported[0].active_version if d.reported else None


def test_a_backlog_stored_at_once_keeps_the_newest_generation_and_the_last_presence(
    engine: Engine,
) -> None:
    repo = Repository(engine)
    for device in ("gw-a", "gw-b", "gw-c"):
        repo.record_contact(device, NOW)
    repo.record_status(Status(device_id="gw-c", state="online", ts=NOW), NOW)
    later = NOW + timedelta(seconds=5)
    repo.record_many(
        [
            reported("gw-b", 2, "2.0"),
            reported("gw-a", 1, "1.0"),
            Status(device_id="gw-a", state="offline"),
            reported("gw-a", 3, "3.0"),
            reported("gw-b", 1, "1.0"),  # a lagging replica's older copy: contact only
            Status(device_id="gw-a", state="online", ts=NOW),
            reported("gw-new", 4, "4.0"),  # never seen before: created
            Status(device_id="gw-c", state="offline"),
            reported("gw-c", 1, "1.0"),  # a report says nothing of presence: still offline
        ],
        later,
    )
    assert serving(repo, "gw-a") == (3, "3.0")
    assert serving(repo, "gw-b") == (2, "2.0")
    assert serving(repo, "gw-new") == (4, "4.0")
    assert serving(repo, "gw-c") == (1, "1.0")
    assert repo.device("gw-a").online is True
    assert repo.device("gw-c").online is False
    assert repo.device("gw-b").online is False  # never said it was online
    assert {d.id: d.last_seen for d in repo.devices()} == dict.fromkeys(
        ("gw-a", "gw-b", "gw-c", "gw-new"), later
    )


def test_replicas_storing_overlapping_backlogs_at_once_neither_deadlock_nor_go_back(
    pg_engine: Engine,
) -> None:
    """Two replicas get the same reports from the broker, batched differently: each stores
    its backlogs in its own order of arrival (here, one the reverse of the other)."""
    repo = Repository(pg_engine)
    devices = [f"gw-{i:03d}" for i in range(60)]
    for device in devices:
        repo.record_contact(device, NOW)
    errors: list[BaseException] = []

    def replica(order: list[str]) -> None:
        try:
            for generation in range(1, 16):
                repo.record_many([reported(d, generation, f"{generation}.0") for d in order], NOW)
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=replica, args=(devices,)),
        threading.Thread(target=replica, args=(devices[::-1],)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert {serving(repo, d) for d in devices} == {(15, "15.0")}
