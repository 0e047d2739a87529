"""Tables of the security issue (7): operator/device API tokens, the audit log, enrolment tokens,
device identities (broker credentials), the fleet's signing keys and signed manifests.

Same ``Base`` as schema.py; migration 0006 creates them. Secrets are never stored: tokens are
kept as SHA-256 digests of their secret part, private signing keys live in files (0600) under the
controller's data directory, never in the database.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Float, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from controller.db.schema import Base, utcnow

__all__ = [
    "ApiTokenRow",
    "AuditRow",
    "Base",
    "DeviceIdentityRow",
    "EnrolRateBucketRow",
    "EnrolTokenRow",
    "SigningKeyRow",
]


class ApiTokenRow(Base):
    """An API token: ``<id>.<secret>`` on the wire, ``sha256(secret)`` here."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(16))
    """viewer, operator, admin or device."""
    device_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """Set for role ``device``: the only device this token speaks for."""
    secret_sha256: Mapped[str] = mapped_column(String(64))
    created_by: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    last_used_at: Mapped[datetime | None]


class AuditRow(Base):
    """One mutating request: who (token name and role), what, on what, and the outcome."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(16))
    action: Mapped[str] = mapped_column(String(128))
    target: Mapped[str | None] = mapped_column(String(256))
    status: Mapped[int] = mapped_column(Integer)
    detail: Mapped[dict[str, Any]] = mapped_column(default=dict)


class EnrolTokenRow(Base):
    """A one-time, expiring enrolment token (``sha256`` of its secret) and who used it."""

    __tablename__ = "enrol_tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    secret_sha256: Mapped[str] = mapped_column(String(64))
    labels: Mapped[dict[str, Any]] = mapped_column(default=dict)
    device_id: Mapped[str | None] = mapped_column(String(64))
    """When set, the token enrols only this device id."""
    created_by: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    used_at: Mapped[datetime | None]
    used_by: Mapped[str | None] = mapped_column(String(64))


class DeviceIdentityRow(Base):
    """An enrolled device: its broker username and API token; revoked devices keep their row."""

    __tablename__ = "device_identities"

    device_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    broker_username: Mapped[str] = mapped_column(String(128))
    broker_password_hash: Mapped[str | None] = mapped_column(String(256))
    """``pbkdf2-sha512$<iterations>$<salt>$<hash>``: the embedded broker checks logins with it."""
    api_token_id: Mapped[str | None] = mapped_column(String(32))
    enrolled_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None]


class SigningKeyRow(Base):
    """A public ed25519 key of the fleet; a rotated-in key carries the old key's endorsement."""

    __tablename__ = "signing_keys"

    key_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    public_key: Mapped[str] = mapped_column(Text)
    """Raw 32-byte public key, base64."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    retired_at: Mapped[datetime | None]
    endorsement: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    """The rotation statement signed by the previous key (None for the first key)."""


class EnrolRateBucketRow(Base):
    """The enrolment rate limit of one client address, shared by every controller replica
    (migration 0011): ``tokens`` left at ``at`` (seconds since the epoch)."""

    __tablename__ = "enrol_rate_buckets"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    at: Mapped[float] = mapped_column(Float, index=True)
