"""Enrolment tokens and enrolled device identities (tables ``enrol_tokens``,
``device_identities``), and the fleet's current public signing key for enrolling devices."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update

from controller.db.schema_security import DeviceIdentityRow, EnrolTokenRow
from controller.db.session import SessionStore, in_chunks
from controller.db.signing_store import newest_unretired_key
from controller.errors import NotFound


@dataclass(frozen=True)
class EnrolTokenRecord:
    """One enrolment token (its secret's digest, never the secret)."""

    id: str
    secret_sha256: str
    labels: dict[str, str]
    device_id: str | None
    created_by: str | None
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None
    used_by: str | None

    def as_json(self) -> dict[str, Any]:
        """The public view (no digest)."""
        return {
            "id": self.id,
            "labels": self.labels,
            "device_id": self.device_id,
            "created_by": self.created_by,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "used_at": self.used_at,
            "used_by": self.used_by,
        }


@dataclass(frozen=True)
class IdentityRecord:
    """An enrolled device's broker user name (and password hash) and API token id."""

    device_id: str
    broker_username: str
    broker_password_hash: str | None
    api_token_id: str | None
    enrolled_at: datetime
    revoked_at: datetime | None

    def as_json(self) -> dict[str, Any]:
        return {
            "device_id": self.device_id,
            "broker_username": self.broker_username,
            "api_token_id": self.api_token_id,
            "enrolled_at": self.enrolled_at,
            "revoked_at": self.revoked_at,
        }


def _token(row: EnrolTokenRow) -> EnrolTokenRecord:
    return EnrolTokenRecord(
        id=row.id,
        secret_sha256=row.secret_sha256,
        labels={str(k): str(v) for k, v in (row.labels or {}).items()},
        device_id=row.device_id,
        created_by=row.created_by,
        created_at=row.created_at,
        expires_at=row.expires_at,
        used_at=row.used_at,
        used_by=row.used_by,
    )


def _identity(row: DeviceIdentityRow) -> IdentityRecord:
    return IdentityRecord(
        device_id=row.device_id,
        broker_username=row.broker_username,
        broker_password_hash=row.broker_password_hash,
        api_token_id=row.api_token_id,
        enrolled_at=row.enrolled_at,
        revoked_at=row.revoked_at,
    )


class IdentityStore(SessionStore):
    """One transaction per method; returns frozen records, never ORM rows."""

    def add_enrol_token(
        self,
        token_id: str,
        secret_sha256: str,
        *,
        labels: dict[str, str],
        device_id: str | None,
        created_by: str | None,
        now: datetime,
        expires_at: datetime,
    ) -> EnrolTokenRecord:
        row = EnrolTokenRow(
            id=token_id,
            secret_sha256=secret_sha256,
            labels=dict(labels),
            device_id=device_id,
            created_by=created_by,
            created_at=now,
            expires_at=expires_at,
        )
        with self._tx() as session:
            session.add(row)
        return _token(row)

    def enrol_token(self, token_id: str) -> EnrolTokenRecord | None:
        with self._tx() as session:
            row = session.get(EnrolTokenRow, token_id)
            return None if row is None else _token(row)

    def enrol_tokens(self) -> list[EnrolTokenRecord]:
        """Every enrolment token, newest first."""
        with self._tx() as session:
            rows = session.execute(
                select(EnrolTokenRow).order_by(EnrolTokenRow.created_at.desc())
            ).scalars()
            return [_token(r) for r in rows]

    def claim_enrol_token(self, token_id: str, device_id: str, now: datetime) -> bool:
        """Mark an unused, unexpired token used by ``device_id``; False when another request
        used it first (one UPDATE guarded by ``used_at IS NULL``, so only one claim wins)."""
        with self._tx() as session:
            result = session.execute(
                update(EnrolTokenRow)
                .where(
                    EnrolTokenRow.id == token_id,
                    EnrolTokenRow.used_at.is_(None),
                    EnrolTokenRow.expires_at > now,
                )
                .values(used_at=now, used_by=device_id)
            )
            return bool(getattr(result, "rowcount", 0) == 1)

    def release_enrol_token(self, token_id: str) -> None:
        """Undo a claim whose enrolment failed half-way, so the token can be used again."""
        with self._tx() as session:
            session.execute(
                update(EnrolTokenRow)
                .where(EnrolTokenRow.id == token_id)
                .values(used_at=None, used_by=None)
            )

    def identity(self, device_id: str) -> IdentityRecord | None:
        with self._tx() as session:
            row = session.get(DeviceIdentityRow, device_id)
            return None if row is None else _identity(row)

    def revoked_among(self, device_ids: Collection[str]) -> set[str]:
        """Those of ``device_ids`` that were enrolled and then revoked: one query for a batch
        (ingest checks every "online" presence; a replica starting at 10,000 gateways receives
        10,000 retained ones at once, and a query each held its inbox for tens of seconds)."""
        found: set[str] = set()
        with self._tx() as session:
            for chunk in in_chunks(sorted(set(device_ids))):
                found.update(
                    session.execute(
                        select(DeviceIdentityRow.device_id)
                        .where(DeviceIdentityRow.device_id.in_(chunk))
                        .where(DeviceIdentityRow.revoked_at.is_not(None))
                    ).scalars()
                )
        return found

    def live_lookalikes(self, device_id: str, canonical: Callable[[str], str]) -> list[str]:
        """Device ids of live identities other than ``device_id`` whose ``canonical`` form is
        ``device_id``'s (``GW-02`` and ``gw-02.`` for ``gw-02``). The candidates are those that
        begin, case aside, with the canonical stem; ``canonical`` decides."""
        stem = canonical(device_id)
        with self._tx() as session:
            candidates = session.execute(
                select(DeviceIdentityRow.device_id)
                .where(func.lower(DeviceIdentityRow.device_id).like(f"{stem}%"))
                .where(DeviceIdentityRow.device_id != device_id)
                .where(DeviceIdentityRow.revoked_at.is_(None))
            ).scalars()
            return sorted(c for c in candidates if canonical(c) == stem)

    def identities(self) -> list[IdentityRecord]:
        with self._tx() as session:
            rows = session.execute(
                select(DeviceIdentityRow).order_by(DeviceIdentityRow.device_id)
            ).scalars()
            return [_identity(r) for r in rows]

    def put_identity(self, record: IdentityRecord) -> None:
        """Create or replace the identity of ``record.device_id`` (re-enrolment replaces)."""
        with self._tx() as session:
            row = session.get(DeviceIdentityRow, record.device_id)
            if row is None:
                row = DeviceIdentityRow(device_id=record.device_id)
                session.add(row)
            row.broker_username = record.broker_username
            row.broker_password_hash = record.broker_password_hash
            row.api_token_id = record.api_token_id
            row.enrolled_at = record.enrolled_at
            row.revoked_at = record.revoked_at

    def revoke_identity(self, device_id: str, now: datetime) -> IdentityRecord:
        """Mark the identity revoked (the first time is kept); NotFound when never enrolled."""
        with self._tx() as session:
            row = session.get(DeviceIdentityRow, device_id)
            if row is None:
                raise NotFound(
                    f"device {device_id!r} has no enrolled identity: see `jetfleet devices ls`"
                )
            if row.revoked_at is None:
                row.revoked_at = now
            return _identity(row)

    def fleet_key(self) -> dict[str, str] | None:
        """The newest unretired public signing key as ``{"key_id", "public_key"}``; None if
        the fleet has no key yet (``jetfleet keys init``)."""
        with self._tx() as session:
            row = session.execute(newest_unretired_key()).scalar_one_or_none()
            return None if row is None else {"key_id": row.key_id, "public_key": row.public_key}
