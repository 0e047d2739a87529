"""What the database hands to the rest of the controller: plain frozen records, no ORM objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from controller.fleet.desired import PlannedSlot

AnalysisState = Literal["pending", "done", "failed"]
"""Where a version's static analysis stands: queued or running, stored, or given up on."""


@dataclass(frozen=True)
class VersionRecord:
    """One stored model version."""

    id: int
    model: str
    version: str
    sha256: str
    size: int
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    created_at: datetime
    has_qdq: bool = False
    analysis: dict[str, Any] = field(default_factory=dict)
    """The analysis report (JSON) per TensorRT version; empty unless ``analysis_state`` is done."""
    analysis_state: AnalysisState = "done"
    analysis_error: str | None = None
    """Why the analysis failed (``analysis_state`` failed)."""


@dataclass(frozen=True)
class DeviceRecord:
    """A device, with what it should serve and what it says it serves."""

    id: str
    labels: dict[str, str]
    online: bool
    last_seen: datetime | None
    desired_generation: int
    observed_generation: int | None
    facts: dict[str, Any] | None
    reported_slots: list[dict[str, Any]]
    serve_url: str | None
    slots: tuple[PlannedSlot, ...]


@dataclass(frozen=True)
class SlotChange:
    """The outcome of a deploy/undeploy on one device."""

    device_id: str
    generation: int
    changed: bool
    slots: tuple[PlannedSlot, ...]


@dataclass(frozen=True)
class TelemetryRecord:
    sample_id: str
    ts: datetime
    cpu_percent: float
    memory_used_bytes: int
    memory_total_bytes: int
    models: list[dict[str, Any]]


@dataclass(frozen=True)
class EventEntry:
    event_id: str
    ts: datetime
    kind: str
    slot: str | None
    message: str


@dataclass(frozen=True)
class ConfigLayerRecord:
    """One stored layer of a named delegate config (``order``: creation order)."""

    name: str
    scope: str
    values: dict[str, Any]
    order: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class SlotRef:
    """A deployed slot that resolves a named config: device, model, version id."""

    device_id: str
    model: str
    model_version_id: int
