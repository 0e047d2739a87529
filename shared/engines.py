"""Engine-store messages (HTTP between agents and the controller's engine store).

An engine is stored as a content-addressed artifact (its bytes) plus a manifest keyed by the
engine key of :mod:`shared.engine_keys` and tuning tag (``TuningTag.label()``). Builds are
coordinated by a lease per (engine key, tuning tag), so when twins in one power mode need the
same engine at once only one builds and the rest pull.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from shared.engine_keys import MAX_TUNING, TUNING_PATTERN, ContentKey, TuningTag, ValidityKey
from shared.manifests import SignedManifest
from shared.topics import DEVICE_ID_PATTERN

SHA256 = r"^[0-9a-f]{64}$"


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineManifest(_Wire):
    """What an engine is, who built it and how long it took. PUT/GET /api/v1/engines/{key}."""

    engine_key: str = Field(pattern=SHA256)
    sha256: str = Field(pattern=SHA256, description="sha256 of the engine bytes (an artifact).")
    size: int = Field(ge=0)
    validity: ValidityKey
    content: ContentKey
    tuning: TuningTag
    built_by: str = Field(description="Device id of the builder.")
    build_seconds: float = Field(ge=0)
    created_at: datetime
    signed: SignedManifest | None = Field(
        default=None,
        description="Set by the controller on GET: the engine's manifest signed with the fleet "
        "key, which a pulling twin verifies. Ignored in a PUT.",
    )


class LeaseRequest(_Wire):
    """POST /api/v1/engines/{key}/lease: ask to be the one device that builds ``key``."""

    device_id: str = Field(json_schema_extra={"pattern": DEVICE_ID_PATTERN})
    ttl_s: float = Field(default=600, gt=0, le=24 * 3600, description="Lease lifetime.")
    tuning: str = Field(
        default="default",
        min_length=1,
        max_length=MAX_TUNING,
        json_schema_extra={"pattern": TUNING_PATTERN},
        description="The tuning tag (TuningTag.label()) the caller builds under: one lease per "
        "(engine key, tuning), so twins in each power mode wait for one build of their own.",
    )


class LeaseOut(_Wire):
    """The answer: granted to the caller, or held by another device until ``expires_at``."""

    engine_key: str
    tuning: str = "default"
    granted: bool
    holder: str
    expires_at: datetime


class ArtifactOut(_Wire):
    """POST /api/v1/artifacts: a stored blob (engine, calibration cache)."""

    sha256: str = Field(pattern=SHA256)
    size: int = Field(ge=0)


class BuildFailure(_Wire):
    """PUT /api/v1/engines/{key}/failure: TensorRT could not build ``key`` on a device, for
    reasons of the model. Twins of that device then serve the version on ONNX Runtime
    at once instead of repeating a build that fails (minutes to hours on a Jetson). The key names
    the TensorRT release and the build config, so a new release or config is a new key."""

    device_id: str = Field(min_length=1, max_length=64)
    validity: ValidityKey
    content: ContentKey
    reason: str = Field(min_length=1, max_length=2000, description="TensorRT's own words.")


class BuildFailureOut(_Wire):
    """A remembered failure of one engine key: GET /api/v1/engines/{key}/failure."""

    engine_key: str = Field(pattern=SHA256)
    device_id: str
    reason: str
    failed_at: datetime
