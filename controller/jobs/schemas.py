"""What the jobs API takes and answers: the request bodies and the view of a stored job.

:func:`job_out` turns a stored :class:`JobRecord` into its API view: the progress entries it
can read, the outcome the device sent, and the recommendation computed from a tune's rows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from controller.db.job_store import JobRecord
from shared.jobs import JobOutcome, JobProgress, ProfileResult, TuneResult, recommend
from shared.wire_model import MODEL_NAME_PATTERN


class _Api(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProfileRequest(_Api):
    """``POST /api/v1/devices/{id}/profile``."""

    model: str = Field(
        description="A model the device serves.", json_schema_extra={"pattern": MODEL_NAME_PATTERN}
    )
    runs: int = Field(default=20, ge=1, le=10_000, description="Profiled inferences.")


class TuneRequest(_Api):
    """``POST /api/v1/tune``."""

    model: str
    version: str
    device: str = Field(description="The device that builds and benchmarks the candidates.")
    candidates: list[str] = Field(min_length=1, description="e.g. fp16, fp16+dla0, ort-basic.")
    power_modes: list[str] = Field(default_factory=list, description="nvpmodel mode names.")
    runs: int = Field(default=50, ge=1, le=100_000)
    warmups: int = Field(default=5, ge=0, le=10_000)
    apply_class: str | None = Field(
        default=None, description="Store the recommendation as this hardware class's layer."
    )
    config: str | None = Field(
        default=None,
        description="Config the layer goes into (default: the device slot's config, else the "
        "model name).",
    )


class RecommendationOut(_Api):
    candidate: str | None
    reason: str


class JobOut(_Api):
    """A job as the API shows it: ``GET /api/v1/jobs/{id}``."""

    id: str
    kind: Literal["profile", "tune"]
    device_id: str
    model: str
    version: str | None
    status: Literal["pending", "running", "succeeded", "failed", "cancelled"]
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    request: dict[str, Any]
    progress: list[JobProgress] = Field(default_factory=list)
    error: str | None = None
    profile: ProfileResult | None = None
    tune: TuneResult | None = None
    recommendation: RecommendationOut | None = None
    apply: dict[str, Any] | None = None
    applied: dict[str, Any] | None = None


class DeviceProfileOut(_Api):
    """The newest profile of one model version on one device."""

    device_id: str
    job_id: str
    finished_at: datetime | None
    profile: ProfileResult


def job_out(record: JobRecord) -> JobOut:
    """The API view of a stored job."""
    progress = []
    for entry in record.progress:
        try:
            progress.append(JobProgress.model_validate(_without_event_id(entry)))
        except ValidationError:
            continue
    outcome = JobOutcome.model_validate(record.result) if record.result else None
    tune = outcome.tune if outcome else None
    advice = recommend(tune.candidates) if tune is not None else None
    return JobOut(
        id=record.id,
        kind="profile" if record.kind == "profile" else "tune",
        device_id=record.device_id,
        model=record.model,
        version=record.version,
        status=record.status,  # type: ignore[arg-type]
        created_at=record.created_at,
        updated_at=record.updated_at,
        finished_at=record.finished_at,
        request=record.request,
        progress=progress,
        error=record.error,
        profile=outcome.profile if outcome else None,
        tune=tune,
        recommendation=RecommendationOut(candidate=advice.candidate, reason=advice.reason)
        if advice
        else None,
        apply=record.apply,
        applied=record.applied,
    )


def _without_event_id(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "event_id"}
