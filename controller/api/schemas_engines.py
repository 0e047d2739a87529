"""HTTP bodies of the engine store's operator side: stored builds with their provenance, the
trust mode per hardware class, approvals. Agents speak :mod:`shared.engines` only."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from controller.artifacts.engines import EngineEntry
from controller.trust.engine_trust import EngineStatus, TrustEntry, TrustMode, UploaderKind
from shared.engine_keys import MAX_TUNING, TUNING_PATTERN
from shared.engines import EngineManifest
from shared.hardware_class import HARDWARE_CLASS_PATTERN


class EngineOut(EngineManifest):
    """GET /api/v1/engines: one stored build, who uploaded it and whether twins get it."""

    uploader: UploaderKind = Field(
        description="Who uploaded it: device, operator, or unknown (stored before this was kept)."
    )
    uploaded_by: str | None = Field(
        description="The uploading device's id or operator token's name (authenticated; "
        "built_by is what the manifest says)."
    )
    hardware_class: str | None = Field(description="The uploading device's hardware class.")
    approved_by: str | None = Field(description="The operator who approved it for twins.")
    approved_at: datetime | None
    trust: TrustMode = Field(description="The trust mode of its class (devices or approval).")
    status: EngineStatus = Field(
        description="operator, approved or trusted: twins pull it; pending: only its builder "
        "uses it until an operator approves it."
    )


def engine_out(entry: EngineEntry) -> EngineOut:
    p = entry.provenance
    return EngineOut(
        **entry.manifest.model_dump(),
        uploader=p.uploader,
        uploaded_by=p.uploaded_by,
        hardware_class=p.hardware_class,
        approved_by=p.approved_by,
        approved_at=p.approved_at,
        trust=entry.mode,
        status=entry.status,
    )


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ApproveIn(_Body):
    """POST /api/v1/engines/{key}/approve."""

    tuning: str | None = Field(
        default=None,
        max_length=MAX_TUNING,
        json_schema_extra={"pattern": TUNING_PATTERN},
        description="The tuning tag of the build to approve; may be left out when the engine "
        "key is stored under one tuning only.",
    )


class TrustIn(_Body):
    """PUT /api/v1/engine-trust: the trust mode of one hardware class (or ``default``)."""

    hardware_class: str = Field(
        max_length=128,
        json_schema_extra={"pattern": HARDWARE_CLASS_PATTERN},
        description="e.g. jetson-orin-nano-8gb/jp6.2, or default for every class without its own.",
    )
    mode: TrustMode = Field(
        description="devices: twins pull device builds at once; approval: only after "
        "`jetfleet engines approve`."
    )


class TrustOut(_Body):
    """One trust setting; ``set_by`` None for the built-in default."""

    hardware_class: str
    mode: TrustMode
    set_by: str | None
    set_at: datetime | None


def trust_out(entry: TrustEntry) -> TrustOut:
    return TrustOut(
        hardware_class=entry.hardware_class,
        mode=entry.mode,
        set_by=entry.set_by,
        set_at=entry.set_at,
    )
