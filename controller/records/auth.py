"""API tokens as stored: roles, a freshly minted token, a token's record (never its secret)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum


class Role(str, Enum):
    """A token's role."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"
    DEVICE = "device"


@dataclass(frozen=True)
class MintedToken:
    """A new token: ``wire`` goes to its owner once, ``secret_sha256`` to the database."""

    id: str
    wire: str
    secret_sha256: str


@dataclass(frozen=True)
class TokenRecord:
    """One stored token (never its secret)."""

    id: str
    name: str
    role: Role
    device_id: str | None
    secret_sha256: str
    created_by: str | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None

    def as_json(self) -> dict[str, object]:
        """The public view (no digest) for the API and ``--json``."""
        return {
            "id": self.id,
            "name": self.name,
            "role": self.role.value,
            "device_id": self.device_id,
            "created_by": self.created_by,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "revoked_at": self.revoked_at,
            "last_used_at": self.last_used_at,
        }
