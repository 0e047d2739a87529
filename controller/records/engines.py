"""Build leases and engine provenance as stored: who holds a lease, who uploaded a build, which
trust mode an operator set per hardware class. What they mean is decided elsewhere
(:mod:`controller.artifacts.leases`, :mod:`controller.trust.engine_trust`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
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
