"""Rollout records (pure): the spec an operator gives, the states, and per-device targets.

A rollout is ``model:version`` (+ a named delegate config) for a set of target devices, pushed in
waves and gated on each device's own health. The database holds these records; the state machine
(:mod:`controller.rollouts.machine`) decides every change from them and a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class RolloutState(str, Enum):
    """``pending → running ⇄ paused → succeeded | failed | aborted | rolled_back``."""

    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABORTED = "aborted"
    ROLLED_BACK = "rolled_back"

    @property
    def active(self) -> bool:
        """Active rollouts hold their devices (one active rollout per device)."""
        return self in ACTIVE


ACTIVE = frozenset({RolloutState.PENDING, RolloutState.RUNNING, RolloutState.PAUSED})


class TargetStatus(str, Enum):
    """Where one device of a rollout stands."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ROLLED_BACK = "rolled_back"
    SKIPPED = "skipped"

    @property
    def terminal(self) -> bool:
        return self not in (TargetStatus.PENDING, TargetStatus.IN_PROGRESS)


class Operation(str, Enum):
    """What an operator may ask of a rollout (applied by the rollout loop)."""

    PAUSE = "pause"
    RESUME = "resume"
    ABORT = "abort"
    ROLLBACK = "rollback"
    RETRY = "retry"


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetSpec(_Spec):
    """Which devices: all conditions given must hold."""

    selector: str | None = Field(
        default=None, description="k=v, k!=v, k in (a,b), k notin (a,b); comma = and."
    )
    devices: tuple[str, ...] = Field(default=(), description="Explicit device ids (or none).")
    hardware_class: str | None = Field(default=None, description="e.g. jetson-orin-nano-8gb/jp6.2")
    jetpack_min: str | None = Field(default=None, description="Lowest JetPack, inclusive.")
    jetpack_max: str | None = Field(default=None, description="Highest JetPack, inclusive.")
    include_late: bool = Field(
        default=False, description="Also roll to matching devices that enrol while it runs."
    )


class Strategy(_Spec):
    """How fast: cumulative waves, canaries first, at most ``max_in_flight`` at once."""

    waves: str = Field(default="1,10%,50%,100%", description="Cumulative counts or percents.")
    canary: tuple[str, ...] = Field(default=(), description="Devices updated first (wave 1).")
    max_in_flight: int | None = Field(default=None, ge=1, description="None: a whole wave.")
    device_timeout_s: float = Field(
        default=600.0, gt=0, description="A device not serving the new version by then failed."
    )
    soak_s: float = Field(
        default=0.0, ge=0, description="How long each device stays healthy before it succeeds."
    )


class Gates(_Spec):
    """Health gates judged on the device's telemetry of the new version during the soak."""

    max_error_percent: float = Field(default=5.0, ge=0, le=100)
    max_p99_ratio: float = Field(
        default=2.0, gt=0, description="p99 latency ≤ this times the device's pre-rollout p99."
    )
    min_requests: int = Field(
        default=20, ge=1, description="Requests needed before the health gates judge a device."
    )


class FailurePolicy(_Spec):
    """When to stop, and whether to undo."""

    max_failures: int | None = Field(default=None, ge=1, description="Abort at ≥ N failed.")
    max_failure_percent: float | None = Field(
        default=None, gt=0, le=100, description="Abort at ≥ P% of the targets failed."
    )
    rollback: bool = Field(default=True, description="Roll updated devices back on abort.")


RolloutKind = Literal["model", "agent"]
"""What a rollout updates: a model's slot, or the agent release itself."""


class RolloutSpec(_Spec):
    """Everything ``rollouts create`` (or ``agent rollout start``) says.

    An agent rollout (``kind`` agent) names the release in ``version`` and
    :data:`shared.agent_releases.AGENT_ARTIFACT_NAME` in ``model``; it has no ``config``.
    """

    kind: RolloutKind = Field(default="model", description="model, or agent (a release).")
    model: str
    version: str
    allow_downgrade: bool = Field(
        default=False, description="Agent rollouts: a release older than a device's may go."
    )
    config: str | None = Field(default=None, description="Named delegate config (None: default).")
    targets: TargetSpec = Field(default_factory=TargetSpec)
    strategy: Strategy = Field(default_factory=Strategy)
    gates: Gates = Field(default_factory=Gates)
    policy: FailurePolicy = Field(default_factory=FailurePolicy)


@dataclass(frozen=True)
class Baseline:
    """A device's inference health before the rollout (None fields: nothing measured)."""

    requests: int = 0
    errors: int = 0
    p99_ms: float | None = None

    @property
    def error_percent(self) -> float | None:
        return None if self.requests == 0 else 100.0 * self.errors / self.requests

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "errors": self.errors, "p99_ms": self.p99_ms}

    @staticmethod
    def from_json(data: dict[str, Any] | None) -> Baseline | None:
        if data is None:
            return None
        return Baseline(int(data["requests"]), int(data["errors"]), data.get("p99_ms"))


@dataclass(frozen=True)
class Target:
    """One device of a rollout."""

    device_id: str
    wave: int
    status: TargetStatus = TargetStatus.PENDING
    reason: str | None = None
    previous: dict[str, Any] | None = None
    """``{"slot": <stored slot JSON> | None}`` once the device was updated (None: not yet); an
    agent rollout's ``{"agent": <the release it ran> | None}``."""
    generation: int | None = None
    """The desired generation that carries the new version (None: not published yet)."""
    started_at: datetime | None = None
    validated_at: datetime | None = None
    finished_at: datetime | None = None
    baseline: Baseline | None = None

    @property
    def updated(self) -> bool:
        """True once the device's desired state was (or is being) changed by this rollout."""
        return self.previous is not None


@dataclass(frozen=True)
class Rollout:
    """A rollout as stored."""

    id: str
    spec: RolloutSpec
    state: RolloutState
    created_at: datetime
    updated_at: datetime
    created_by: str = "operator"
    reason: str | None = None
    requested_op: Operation | None = None
    requested_by: str | None = None
    current_wave: int = 0
    waves: int = 1
    started_at: datetime | None = None
    finished_at: datetime | None = None
    targets: tuple[Target, ...] = field(default=())


@dataclass(frozen=True)
class AuditEntry:
    """One transition of a rollout or of one of its devices."""

    ts: datetime
    actor: str
    kind: str
    """``rollout`` (its state changed), ``target`` (a device's status changed) or ``op``."""
    from_state: str | None
    to_state: str | None
    reason: str
    device_id: str | None = None
