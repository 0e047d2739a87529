"""API tokens (pure): the ``jf_<id>.<secret>`` format, digests, expiry, durations.

Only ``sha256(secret)`` is stored; the secret is shown once, when the token is created. The id
(12 hex characters) is public: it names the token in listings, the audit log and ``revoke``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from controller.records import MintedToken as MintedToken
from controller.records import Role
from controller.records import TokenRecord as TokenRecord

PREFIX = "jf_"
ID_HEX = 12
SECRET_BYTES = 32
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@:+-]{0,63}")
_WIRE = re.compile(r"jf_([0-9a-f]{12})\.([A-Za-z0-9_-]{43})")
_DURATION = re.compile(r"(\d+)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class MalformedToken(ValueError):
    """The text is not a ``jf_<id>.<secret>`` token."""


@dataclass(frozen=True)
class Principal:
    """Who is calling: the resolved token (or the stand-in when authentication is off)."""

    name: str
    role: Role
    token_id: str | None = None
    device_id: str | None = None


ANONYMOUS_ADMIN = Principal(name="anonymous", role=Role.ADMIN)
"""The principal of every request while authentication is switched off."""


def digest(secret: str) -> str:
    """Hex sha256 of a token's secret part."""
    return hashlib.sha256(secret.encode()).hexdigest()


def mint() -> MintedToken:
    """A fresh random token."""
    token_id = secrets.token_hex(ID_HEX // 2)
    secret = base64.urlsafe_b64encode(secrets.token_bytes(SECRET_BYTES)).decode().rstrip("=")
    return MintedToken(token_id, f"{PREFIX}{token_id}.{secret}", digest(secret))


def parse(wire: str) -> tuple[str, str]:
    """(id, secret) of a wire token; :class:`MalformedToken` otherwise."""
    match = _WIRE.fullmatch(wire.strip())
    if match is None:
        raise MalformedToken("not a Jetfleet API token (expected jf_<id>.<secret>)")
    return match.group(1), match.group(2)


def secret_matches(secret: str, secret_sha256: str) -> bool:
    """Constant-time comparison of a presented secret with the stored digest."""
    return hmac.compare_digest(digest(secret), secret_sha256)


def rejection(record: TokenRecord, now: datetime) -> str | None:
    """Why a stored token may not be used now (revoked, expired); None when it may."""
    if record.revoked_at is not None:
        return f"API token {record.id} ({record.name}) was revoked at {_stamp(record.revoked_at)}"
    if record.expires_at is not None and record.expires_at <= now:
        return f"API token {record.id} ({record.name}) expired at {_stamp(record.expires_at)}"
    return None


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` or combinations (``1h30m``); ValueError else."""
    compact = text.strip().lower()
    parts = _DURATION.findall(compact)
    if not compact or not parts or _DURATION.sub("", compact).strip():
        raise ValueError(f"{text!r} is not a duration: use e.g. 30d, 12h, 90m, 1h30m")
    seconds = sum(int(n) * _UNITS[unit] for n, unit in parts)
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
    return timedelta(seconds=seconds)


def check_name(name: str) -> str:
    """``name`` when it is a valid token name; ValueError saying what is allowed otherwise."""
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"token name {name!r}: use 1-64 characters, letters, digits and . _ @ : + - "
            "(starting with a letter or digit)"
        )
    return name
