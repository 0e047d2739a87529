"""API tokens and the audit log in the database (tables ``api_tokens`` and ``audit_log``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update

from controller.db.schema_security import ApiTokenRow, AuditRow
from controller.db.session import SessionStore
from controller.errors import NotFound
from controller.records import MintedToken, Role, TokenRecord

TOUCH_EVERY = timedelta(minutes=1)
"""``last_used_at`` is written at most this often per token."""


@dataclass(frozen=True)
class AuditRecord:
    """One mutating API request: who, what, on what, and the HTTP status it got."""

    at: datetime
    actor: str
    role: str
    action: str
    target: str | None
    status: int
    detail: dict[str, Any] = field(default_factory=dict)
    id: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at,
            "actor": self.actor,
            "role": self.role,
            "action": self.action,
            "target": self.target,
            "status": self.status,
            "detail": self.detail,
        }


def _record(row: ApiTokenRow) -> TokenRecord:
    return TokenRecord(
        id=row.id,
        name=row.name,
        role=Role(row.role),
        device_id=row.device_id,
        secret_sha256=row.secret_sha256,
        created_by=row.created_by,
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
        last_used_at=row.last_used_at,
    )


class TokenStore(SessionStore):
    """One transaction per method; returns frozen records, never ORM rows."""

    def create(
        self,
        minted: MintedToken,
        name: str,
        role: Role,
        *,
        now: datetime,
        device_id: str | None = None,
        expires_at: datetime | None = None,
        created_by: str | None = None,
    ) -> TokenRecord:
        """Store a minted token (its digest only)."""
        row = ApiTokenRow(
            id=minted.id,
            name=name,
            role=role.value,
            device_id=device_id,
            secret_sha256=minted.secret_sha256,
            created_by=created_by,
            created_at=now,
            expires_at=expires_at,
        )
        with self._tx() as session:
            session.add(row)
        return _record(row)

    def get(self, token_id: str) -> TokenRecord | None:
        """The token with this id, revoked and expired ones included."""
        with self._tx() as session:
            row = session.get(ApiTokenRow, token_id)
            return None if row is None else _record(row)

    def all(self) -> list[TokenRecord]:
        """Every token, oldest first."""
        with self._tx() as session:
            rows = session.execute(
                select(ApiTokenRow).order_by(ApiTokenRow.created_at, ApiTokenRow.id)
            ).scalars()
            return [_record(r) for r in rows]

    def revoke(self, token_id: str, now: datetime) -> TokenRecord:
        """Revoke a token (again is harmless: the first time is kept)."""
        with self._tx() as session:
            row = session.get(ApiTokenRow, token_id)
            if row is None:
                raise NotFound(f"no API token {token_id!r}: see `jetfleet tokens list`")
            if row.revoked_at is None:
                row.revoked_at = now
            return _record(row)

    def touch(self, token_id: str, now: datetime) -> None:
        """Record a use, unless one was recorded less than :data:`TOUCH_EVERY` ago."""
        with self._tx() as session:
            session.execute(
                update(ApiTokenRow)
                .where(
                    ApiTokenRow.id == token_id,
                    or_(
                        ApiTokenRow.last_used_at.is_(None),
                        ApiTokenRow.last_used_at < now - TOUCH_EVERY,
                    ),
                )
                .values(last_used_at=now)
            )

    def has_admin(self, now: datetime) -> bool:
        """True when an admin token exists that is neither revoked nor expired."""
        with self._tx() as session:
            found = session.execute(
                select(ApiTokenRow.id)
                .where(
                    ApiTokenRow.role == Role.ADMIN.value,
                    ApiTokenRow.revoked_at.is_(None),
                    or_(ApiTokenRow.expires_at.is_(None), ApiTokenRow.expires_at > now),
                )
                .limit(1)
            ).first()
            return found is not None

    def append_audit(self, record: AuditRecord) -> None:
        """Add one audit row."""
        with self._tx() as session:
            session.add(
                AuditRow(
                    at=record.at,
                    actor=record.actor[:64],
                    role=record.role[:16],
                    action=record.action[:128],
                    target=None if record.target is None else record.target[:256],
                    status=record.status,
                    detail=record.detail,
                )
            )

    def audit(
        self, since: datetime | None = None, actor: str | None = None, limit: int = 100
    ) -> list[AuditRecord]:
        """Audit rows, newest first, optionally since a time and of one actor."""
        query = select(AuditRow).order_by(AuditRow.at.desc(), AuditRow.id.desc()).limit(limit)
        if since is not None:
            query = query.where(AuditRow.at >= since)
        if actor is not None:
            query = query.where(AuditRow.actor == actor)
        with self._tx() as session:
            return [
                AuditRecord(
                    id=r.id,
                    at=r.at,
                    actor=r.actor,
                    role=r.role,
                    action=r.action,
                    target=r.target,
                    status=r.status,
                    detail=dict(r.detail or {}),
                )
                for r in session.execute(query).scalars()
            ]
