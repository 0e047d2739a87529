"""Build leases and engine provenance as stored: who holds a lease, who uploaded a build, which
trust mode an operator set per hardware class.

Two pure decisions live beside them because the database takes them inside its transaction,
under the row lock it holds (:mod:`controller.db.lease_rows`, :mod:`controller.db.engine_store`):
who holds a lease now (:func:`decide_lease`: which device builds an engine, which controller
leads) and whether an upload may replace a stored build (:func:`may_replace`). The rest of what
provenance and trust modes mean is decided in :mod:`controller.trust.engine_trust`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from controller.errors import InvalidInput


@dataclass(frozen=True)
class Lease:
    """Who holds the build lease of one engine key, and until when."""

    holder: str
    expires_at: datetime


@dataclass(frozen=True)
class Decision:
    """The answer to a lease request: ``lease`` is the caller's when granted, else the holder's."""

    granted: bool
    lease: Lease


TrustMode = Literal["devices", "approval"]
"""Per hardware class: are device builds shared with twins at once, or after approval?"""
UploaderKind = Literal["device", "operator", "unknown"]
"""Who uploaded a stored build; ``unknown`` for builds stored before uploaders were recorded."""


@dataclass(frozen=True)
class Provenance:
    """Who stored a build, for which class, and who approved it for twins."""

    uploader: UploaderKind
    uploaded_by: str | None
    hardware_class: str | None
    approved_by: str | None = None
    approved_at: datetime | None = None


UNRECORDED = Provenance("unknown", None, None)


def decide_lease(existing: Lease | None, holder: str, ttl_s: float, now: datetime) -> Decision:
    """Grant ``holder`` the lease for ``ttl_s`` when nobody holds an unexpired one or it holds it
    itself (renewal), else deny. A build lease names the one device that builds an engine twins
    need at once (the rest pull it) until it expires, so a builder that died frees it by timing
    out; the controllers' leadership lease is decided the same way. The clock is a parameter so
    expiry is tested without waiting; running this inside one locked transaction
    (:mod:`controller.db.lease_rows`) is what gives a race one winner."""
    if existing is None or existing.expires_at <= now or existing.holder == holder:
        return Decision(True, Lease(holder, now + timedelta(seconds=ttl_s)))
    return Decision(False, existing)


def may_replace(stored: Provenance, new: Provenance) -> bool:
    """May the upload of ``new`` replace the stored build of the same (engine key, tuning) with
    other bytes? Only an operator's, and only over a device's (or unrecorded) build that no
    operator approved: the operator-side build approval mode asks for must not be blocked by the
    device build it replaces. Everything else keeps "first writer wins" (409)."""
    return new.uploader == "operator" and stored.uploader != "operator" and not stored.approved_by


@dataclass(frozen=True)
class TrustEntry:
    """The trust mode an operator set for one hardware class (or ``default``, for all others)."""

    hardware_class: str
    mode: TrustMode
    set_by: str | None
    set_at: datetime | None


def check_mode(mode: str) -> TrustMode:
    """``mode`` as a :data:`TrustMode`; else InvalidInput."""
    if mode == "devices":
        return "devices"
    if mode == "approval":
        return "approval"
    raise InvalidInput(f"invalid trust mode {mode[:40]!r}: expected devices or approval")
