"""The bench's database: a fresh PostgreSQL database per run, the enrolled fleet written in
bulk, and the reads the bench measures with (rollouts, targets, the lease, telemetry ids).

Bulk enrolment writes what :class:`controller.trust.enrolment.EnrolmentService` stores for a
device enrolled with a labelled token: its ``devices`` row with the token's labels (never seen
yet) and its ``device_identities`` row (broker user name, password hash, no API token: the
simulated gateways download nothing).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
import sqlalchemy as sa

from bench.scale.broker import DeviceSecret
from controller.db.schema import Device, utcnow
from controller.db.schema_security import DeviceIdentityRow

CHUNK = 1000


def create_database(server_url: str) -> str:
    """A new empty database on the server of ``server_url``; its SQLAlchemy URL."""
    name = f"jetfleet_scale_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(_plain(server_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = server_url.rpartition("/")
    return f"{base}/{name}"


def drop_database(server_url: str, db_url: str) -> None:
    name = db_url.rpartition("/")[2]
    with psycopg.connect(_plain(server_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_name(db_url: str) -> str:
    return db_url.rpartition("/")[2]


def _plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def upgrade(db_url: str) -> None:
    """``jetfleet db upgrade``, once, before any replica starts (as a deployment does)."""
    subprocess.run(
        [sys.executable, "-m", "controller", "db", "upgrade", "--db", db_url],
        check=True,
        capture_output=True,
        timeout=180,
    )


def enrol_in_bulk(db_url: str, devices: list[DeviceSecret], labels: dict[str, str]) -> None:
    engine = sa.create_engine(db_url)
    now = utcnow()
    try:
        with engine.begin() as conn:
            for start in range(0, len(devices), CHUNK):
                chunk = devices[start : start + CHUNK]
                conn.execute(
                    sa.insert(Device),
                    [
                        {
                            "id": d.cred.device_id,
                            "labels": dict(labels),
                            "online": False,
                            "desired_generation": 0,
                            "reported_slots": [],
                            "created_at": now,
                        }
                        for d in chunk
                    ],
                )
                conn.execute(
                    sa.insert(DeviceIdentityRow),
                    [
                        {
                            "device_id": d.cred.device_id,
                            "broker_username": d.cred.username,
                            "broker_password_hash": d.hashed.encode(),
                            "api_token_id": None,
                            "enrolled_at": now,
                        }
                        for d in chunk
                    ],
                )
    finally:
        engine.dispose()


@dataclass(frozen=True)
class RolloutRow:
    state: str
    current_wave: int
    waves: int
    created_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True)
class TargetRow:
    device_id: str
    wave: int
    status: str
    generation: int | None
    started_at: datetime | None
    validated_at: datetime | None
    finished_at: datetime | None


class Reader:
    """Plain reads on one connection (autocommit: each read sees the latest commits)."""

    def __init__(self, db_url: str) -> None:
        self._conn = psycopg.connect(_plain(db_url), autocommit=True)

    def close(self) -> None:
        self._conn.close()

    def rollout(self, rollout_id: str) -> RolloutRow:
        row = self._conn.execute(
            "SELECT state, current_wave, waves, created_at, finished_at FROM rollouts "
            "WHERE id = %s",
            (rollout_id,),
        ).fetchone()
        assert row is not None, rollout_id
        return RolloutRow(str(row[0]), int(row[1]), int(row[2]), row[3], row[4])

    def targets(self, rollout_id: str) -> list[TargetRow]:
        rows = self._conn.execute(
            "SELECT device_id, wave, status, generation, started_at, validated_at, finished_at "
            "FROM rollout_targets WHERE rollout_id = %s",
            (rollout_id,),
        ).fetchall()
        return [TargetRow(*r) for r in rows]

    def lease(self) -> tuple[str, datetime] | None:
        row = self._conn.execute(
            "SELECT holder, expires_at FROM controller_leases WHERE name = 'rollouts'"
        ).fetchone()
        return None if row is None else (str(row[0]), row[1])

    def generations(self) -> dict[str, tuple[int, int | None]]:
        """Device → (desired generation, observed generation)."""
        rows = self._conn.execute(
            "SELECT id, desired_generation, observed_generation FROM devices"
        ).fetchall()
        return {str(r[0]): (int(r[1]), r[2]) for r in rows}

    def online(self) -> int:
        row = self._conn.execute("SELECT count(*) FROM devices WHERE online").fetchone()
        return int(row[0]) if row else 0

    def sample_ids(self) -> list[str]:
        """Every stored telemetry sample id (one per stored row)."""
        rows = self._conn.execute("SELECT sample_id FROM telemetry_samples").fetchall()
        return [str(r[0]) for r in rows]

    def sample_count(self) -> int:
        row = self._conn.execute("SELECT count(*) FROM telemetry_samples").fetchone()
        return int(row[0]) if row else 0

    def scalar(self, sql: str, *args: Any) -> Any:
        row = self._conn.execute(sql, args).fetchone()
        return None if row is None else row[0]
