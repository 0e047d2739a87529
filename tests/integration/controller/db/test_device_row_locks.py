"""A deployment and a telemetry batch lock device rows in the same order (by id), so they wait
for each other instead of deadlocking (found by bench/scale.py: a deploy to 10,000 devices
while their telemetry flowed was PostgreSQL's deadlock victim and answered 503)."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

from sqlalchemy import Engine, text

from controller.db.repository import Repository
from controller.db.telemetry_store import TelemetryStore, WriteResult
from shared.telemetry import Telemetry

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


def sample(device_id: str) -> Telemetry:
    return Telemetry(
        device_id=device_id,
        sample_id=f"{device_id}:1",
        ts=NOW,
        interval_s=30.0,
        cpu_percent=1.0,
        memory_used_bytes=1,
        memory_total_bytes=2,
    )


def waiting_on_a_lock(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                )
            ).scalar_one()
        )


def test_a_telemetry_batch_waits_behind_a_deploy_instead_of_deadlocking(pg_engine: Engine) -> None:
    repo = Repository(pg_engine)
    for device_id in ("gw-b", "gw-a"):  # gw-b first on disk: a scan meets it first
        repo.record_contact(device_id, NOW)
    store = TelemetryStore(pg_engine)
    written: list[WriteResult | BaseException] = []

    def write() -> None:
        try:
            written.append(store.write_batch([sample("gw-b"), sample("gw-a")], [], NOW))
        except BaseException as exc:  # the assertions below read it
            written.append(exc)

    with pg_engine.connect() as deploy:
        tx = deploy.begin()
        deploy.execute(text("SET LOCAL lock_timeout = '10s'"))
        # a deploy holds gw-a and goes on to gw-b (change_each locks in id order)
        deploy.execute(text("SELECT id FROM devices WHERE id = 'gw-a' FOR NO KEY UPDATE"))
        writer = threading.Thread(target=write)
        writer.start()
        deadline = time.monotonic() + 10
        while waiting_on_a_lock(pg_engine) == 0:
            assert time.monotonic() < deadline, "the telemetry batch never waited for gw-a"
            time.sleep(0.05)
        deploy.execute(text("SELECT id FROM devices WHERE id = 'gw-b' FOR NO KEY UPDATE"))
        tx.commit()
    writer.join(20)
    assert len(written) == 1
    result = written[0]
    assert isinstance(result, WriteResult), result
    assert result.samples_inserted == 2
