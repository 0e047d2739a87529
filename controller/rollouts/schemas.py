"""HTTP bodies of ``/api/v1/rollouts`` (shared by the routes, the CLI's JSON and the tests)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from controller.records.rollouts import RolloutKind
from controller.rollouts.model import (
    AuditEntry,
    FailurePolicy,
    Gates,
    Rollout,
    Strategy,
    Target,
    TargetSpec,
)


class _Api(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RolloutCreate(_Api):
    """POST /api/v1/rollouts (``kind`` agent: ``version`` is an agent release, ``model`` may be
    left out)."""

    kind: RolloutKind = "model"
    model: str | None = Field(default=None, description="Required for a model rollout.")
    version: str
    allow_downgrade: bool = Field(
        default=False, description="Agent rollouts: allow a release older than a device's agent."
    )
    config: str | None = None
    targets: TargetSpec = Field(default_factory=TargetSpec)
    strategy: Strategy = Field(default_factory=Strategy)
    gates: Gates = Field(default_factory=Gates)
    policy: FailurePolicy = Field(default_factory=FailurePolicy)
    actor: str = Field(default="operator", max_length=64, description="Who asks (audit trail).")
    strict: bool = Field(
        default=False,
        description="Refuse when a target device cannot build the model with its runtime.",
    )


class TargetOut(_Api):
    device_id: str
    wave: int = Field(description="1-based wave number.")
    status: str
    reason: str | None
    generation: int | None
    previous_version: str | None = Field(
        description="What a rollback restores (None: no slot); agent rollouts: the release the "
        "device ran before."
    )
    started_at: datetime | None
    validated_at: datetime | None
    finished_at: datetime | None
    baseline_p99_ms: float | None


class WaveOut(_Api):
    wave: int
    devices: int
    counts: dict[str, int]


class RolloutOut(_Api):
    """GET /api/v1/rollouts/{id} (``targets`` left out of the list)."""

    id: str
    kind: RolloutKind = "model"
    model: str
    version: str
    allow_downgrade: bool = False
    config: str | None
    state: str
    reason: str | None
    requested_op: str | None
    current_wave: int = Field(description="1-based wave being updated.")
    waves: list[WaveOut]
    counts: dict[str, int]
    created_by: str
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    targets_spec: TargetSpec
    strategy: Strategy
    gates: Gates
    policy: FailurePolicy
    targets: list[TargetOut] | None = None
    warnings: list[str] = Field(
        default_factory=list, description="Delegation warnings found at creation."
    )


class AuditOut(_Api):
    ts: datetime
    actor: str
    kind: str
    from_state: str | None
    to_state: str | None
    device_id: str | None
    reason: str


def rollout_out(r: Rollout, with_targets: bool = True) -> RolloutOut:
    """The API view of a stored rollout."""
    waves: dict[int, Counter[str]] = {}
    for t in r.targets:
        waves.setdefault(t.wave, Counter())[t.status.value] += 1
    return RolloutOut(
        id=r.id,
        kind=r.spec.kind,
        model=r.spec.model,
        allow_downgrade=r.spec.allow_downgrade,
        version=r.spec.version,
        config=r.spec.config,
        state=r.state.value,
        reason=r.reason,
        requested_op=None if r.requested_op is None else r.requested_op.value,
        current_wave=r.current_wave + 1,
        waves=[
            WaveOut(wave=w + 1, devices=sum(c.values()), counts=dict(c))
            for w, c in sorted(waves.items())
        ],
        counts=dict(Counter(t.status.value for t in r.targets)),
        created_by=r.created_by,
        created_at=r.created_at,
        updated_at=r.updated_at,
        started_at=r.started_at,
        finished_at=r.finished_at,
        targets_spec=r.spec.targets,
        strategy=r.spec.strategy,
        gates=r.spec.gates,
        policy=r.spec.policy,
        targets=[_target_out(t) for t in r.targets] if with_targets else None,
    )


def _target_out(t: Target) -> TargetOut:
    slot = (t.previous or {}).get("slot")
    agent = (t.previous or {}).get("agent")
    return TargetOut(
        device_id=t.device_id,
        wave=t.wave + 1,
        status=t.status.value,
        reason=t.reason,
        generation=t.generation,
        previous_version=str(slot.get("version")) if slot else (str(agent) if agent else None),
        started_at=t.started_at,
        validated_at=t.validated_at,
        finished_at=t.finished_at,
        baseline_p99_ms=None if t.baseline is None else t.baseline.p99_ms,
    )


def audit_out(e: AuditEntry) -> AuditOut:
    return AuditOut(
        ts=e.ts,
        actor=e.actor,
        kind=e.kind,
        from_state=e.from_state,
        to_state=e.to_state,
        device_id=e.device_id,
        reason=e.reason,
    )
