"""Wire messages: one versioned pydantic model per MQTT payload.

The topics and who publishes what: docs/architecture.md#the-wire-contract.

Here: desired, reported, event and status. The facts a reported document carries are in
:mod:`shared.facts`, the telemetry sample in :mod:`shared.telemetry`, their base and patterns in
:mod:`shared.wire_model`. Every message carries ``schema`` (``jetfleet/<kind>/<n>``). Receivers
decode with :func:`shared.codec.decode`, which turns any validation failure into one error naming
the field.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any, Final, Literal

from pydantic import Field, field_validator

from shared.agent_releases import AgentReleaseOrder, AgentUpdateStatus
from shared.delegate import DelegateConfig
from shared.facts import DeviceFacts
from shared.jobs import Job
from shared.manifests import (
    ArtifactRef,
    DocumentSignature,
    KeyEndorsement,
    RollbackAuthorization,
    document_payload,
)
from shared.topics import DEVICE_ID_PATTERN
from shared.wire_model import (
    MODEL_NAME_PATTERN,
    VERSION_PATTERN,
    DeviceId,
    WireModel,
)

__all__ = [
    "SCHEMA_DESIRED",
    "SCHEMA_EVENT",
    "SCHEMA_REPORTED",
    "SCHEMA_STATUS",
    "ArtifactRef",  # a model slot's artifact; defined in shared.manifests
    "DesiredState",
    "DeviceFacts",  # the facts inside ReportedState; defined in shared.facts
    "Event",
    "EventKind",
    "JsonValue",
    "ModelSlot",
    "ReportedState",
    "ServingSettings",
    "SlotPhase",
    "SlotStatus",
    "Status",
]

SCHEMA_DESIRED: Final = "jetfleet/desired/1"
SCHEMA_REPORTED: Final = "jetfleet/reported/1"
SCHEMA_EVENT: Final = "jetfleet/event/1"
SCHEMA_STATUS: Final = "jetfleet/status/1"


# --- desired ---------------------------------------------------------------------------------


class ServingSettings(WireModel):
    """How the agent exposes a slot locally."""

    max_queue: int = Field(default=64, ge=1, description="Requests waiting before 503.")
    intra_op_threads: int = Field(default=1, ge=1, le=64, description="CPU threads per request.")
    max_batch_size: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="Rows per batched inference (dynamic batching); 1 turns batching off.",
    )
    max_queue_delay_ms: float = Field(
        default=0,
        ge=0,
        le=10_000,
        description="How long a request may wait for others to batch with (milliseconds).",
    )


class ModelSlot(WireModel):
    """One model the gateway must serve: name, version, artifact, delegate config, serving."""

    name: str = Field(pattern=MODEL_NAME_PATTERN, description="Model name, unique per device.")
    version: str = Field(pattern=VERSION_PATTERN, description="Model version.")
    artifact: ArtifactRef
    delegate: DelegateConfig = Field(default_factory=DelegateConfig)
    serving: ServingSettings = Field(default_factory=ServingSettings)
    reference: ArtifactRef | None = Field(
        default=None,
        description="NPZ of reference inputs and FP32 outputs (input:<name>, output:<name>, "
        "first axis = case) the agent validates a new engine against before switching to it.",
    )
    reference_calibrates: bool = Field(
        default=False,
        exclude_if=lambda calibrates: not calibrates,
        description="The reference's inputs are the operator's samples (not random ones) of a "
        "model without Q/DQ nodes: a TensorRT INT8 (or best) build whose config names no "
        "calibration cache calibrates on the device from them. Left out of the JSON when "
        "false, so documents signed before it still verify.",
    )
    rollback: RollbackAuthorization | None = Field(
        default=None,
        description="Signed permission to install this version although it is older (lower "
        "serial) than the one the device may have installed.",
    )


class DesiredState(WireModel):
    """The full desired document for one device (never a delta); retained on ``desired``."""

    schema_: Literal["jetfleet/desired/1"] = Field(default=SCHEMA_DESIRED, alias="schema")
    device_id: DeviceId = Field(pattern=DEVICE_ID_PATTERN)
    generation: int = Field(ge=0, description="Monotonic per device; bumps on every change.")
    issued_at: datetime
    slots: tuple[ModelSlot, ...] = ()
    fleet_keys: tuple[KeyEndorsement, ...] = Field(
        default=(),
        description="The fleet key's rotations, oldest first: each new key signed by the one "
        "before, so an agent that pinned an older key can follow.",
    )
    jobs: tuple[Job, ...] = Field(
        default=(),
        exclude_if=lambda jobs: not jobs,
        description="Profiling/tuning jobs to run once each (shared.jobs); left out of the "
        "JSON when there are none, so agents that predate jobs still accept the document.",
    )
    agent: AgentReleaseOrder | None = Field(
        default=None,
        exclude_if=lambda agent: agent is None,
        description="The agent release to run (shared.agent_releases); left out of the JSON "
        "when unset, so agents that predate self-update still accept the document.",
    )
    signature: DocumentSignature | None = Field(
        default=None,
        exclude_if=lambda signature: signature is None,
        description="The fleet key's signature over the rest of the document "
        "(shared.manifests.document_payload); an agent with a pinned key refuses it without.",
    )

    def signing_payload(self) -> bytes:
        """The bytes :attr:`signature` covers (the document without it)."""
        return document_payload(self)

    @field_validator("slots")
    @classmethod
    def _unique_slot_names(cls, slots: tuple[ModelSlot, ...]) -> tuple[ModelSlot, ...]:
        names = [s.name for s in slots]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"model slot names must be unique, repeated: {', '.join(dupes)}")
        return slots

    def slot(self, name: str) -> ModelSlot | None:
        """The slot serving model ``name``, if any."""
        return next((s for s in self.slots if s.name == name), None)


# --- reported --------------------------------------------------------------------------------


class SlotPhase(str, Enum):
    """Where a model slot stands on the device."""

    IDLE = "idle"
    DOWNLOADING = "downloading"
    BUILDING = "building"
    VALIDATING = "validating"
    SWAPPING = "swapping"
    SERVING = "serving"
    FAILED = "failed"
    ROLLED_BACK = "rolled_back"


class SlotStatus(WireModel):
    """The agent's view of one slot."""

    name: str = Field(pattern=MODEL_NAME_PATTERN)
    desired_version: str | None = None
    active_version: str | None = Field(default=None, description="Version serving now.")
    phase: SlotPhase
    engine_key: str | None = None
    runtime: str | None = Field(default=None, description="onnxruntime or tensorrt.")
    engine_source: Literal["cached", "pulled", "built"] | None = Field(
        default=None, description="Where the active engine came from on this device."
    )
    tuning_tag: str | None = Field(
        default=None, description="Power mode/clocks the active engine was tuned under."
    )
    tuning_matches: bool | None = Field(
        default=None, description="False while serving an engine tuned under another power mode."
    )
    last_error: str | None = None
    fallback_reason: str | None = Field(
        default=None,
        description="Why this slot serves on ONNX Runtime although the device runs TensorRT: "
        "TensorRT's own words when it could not build, load or validate the version (issue "
        "30). None while TensorRT serves it, or on an ONNX Runtime device. Added within "
        "jetfleet/reported/1: older reports lack it.",
    )
    updated_at: datetime


class ReportedState(WireModel):
    """The agent's answer to a desired document; retained on ``reported``."""

    schema_: Literal["jetfleet/reported/1"] = Field(default=SCHEMA_REPORTED, alias="schema")
    device_id: DeviceId = Field(pattern=DEVICE_ID_PATTERN)
    observed_generation: int = Field(ge=-1, description="-1 until a desired document arrived.")
    reported_at: datetime
    slots: tuple[SlotStatus, ...] = ()
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="The agent's `labels` setting. Ignored by the controller: labels come from "
        "the operator or the enrolment token, never from the device. Kept so reports of older "
        "agents stay valid (wire models refuse unknown fields).",
    )
    facts: DeviceFacts
    serve_url: str | None = Field(default=None, description="Local KServe v2 endpoint.")
    agent_version: str
    agent_update: AgentUpdateStatus | None = Field(
        default=None,
        exclude_if=lambda update: update is None,
        description="The latest agent update (shared.agent_releases); left out when there was "
        "none, so controllers that predate self-update still accept the report.",
    )


# --- events and presence ---------------------------------------------------------------------

EventKind = Literal[
    "download_started",
    "download_done",
    "download_failed",
    "build_started",
    "build_progress",
    "build_done",
    "build_failed",
    "fallback",
    "swap",
    "rollback",
    "error",
    "artifact_refused",
    "key_rotated",
    "key_refused",
    "desired_refused",
    "job_progress",
    "job_result",
    "agent_update",
]

JsonValue = Any


class Event(WireModel):
    """Something that happened on a device, for the operator's timeline."""

    schema_: Literal["jetfleet/event/1"] = Field(default=SCHEMA_EVENT, alias="schema")
    device_id: DeviceId = Field(pattern=DEVICE_ID_PATTERN)
    event_id: str = Field(min_length=1, max_length=128, description="Idempotency key.")
    ts: datetime
    kind: EventKind
    slot: str | None = None
    message: str = ""
    data: dict[str, JsonValue] = Field(default_factory=dict)


class Status(WireModel):
    """Presence, retained on ``status``; the offline one is the agent's Last Will."""

    schema_: Literal["jetfleet/status/1"] = Field(default=SCHEMA_STATUS, alias="schema")
    device_id: DeviceId = Field(pattern=DEVICE_ID_PATTERN)
    state: Literal["online", "offline"]
    ts: datetime | None = Field(default=None, description="None in the Last Will (set at connect).")
