"""Wire messages: one versioned pydantic model per MQTT payload (ARCHITECTURE.md §3).

Every message carries ``schema`` (``jetfleet/<kind>/<n>``). Receivers decode with
:func:`shared.codec.decode`, which turns any validation failure into one error naming the field.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, field_validator

from shared.delegate import DelegateConfig
from shared.jobs import Job
from shared.manifests import (
    DocumentSignature,
    KeyEndorsement,
    RollbackAuthorization,
    SignedManifest,
    document_payload,
)
from shared.topics import DEVICE_ID_PATTERN

SCHEMA_DESIRED: Final = "jetfleet/desired/1"
SCHEMA_REPORTED: Final = "jetfleet/reported/1"
SCHEMA_TELEMETRY: Final = "jetfleet/telemetry/1"
SCHEMA_EVENT: Final = "jetfleet/event/1"
SCHEMA_FACTS: Final = "jetfleet/facts/1"
SCHEMA_STATUS: Final = "jetfleet/status/1"

MODEL_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$"
SHA256_PATTERN = r"^[0-9a-f]{64}$"

DeviceId = str


class WireModel(BaseModel):
    """Base of every wire message: unknown fields are errors, instances are immutable."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True
    )


# --- desired ---------------------------------------------------------------------------------


class ArtifactRef(WireModel):
    """Where to fetch a model's bytes and how to recognise them."""

    url: str = Field(description="HTTP(S) URL of the artifact (supports Range).")
    sha256: str = Field(pattern=SHA256_PATTERN, description="sha256 of the bytes, lower-case hex.")
    size: int = Field(ge=0, description="Size in bytes.")
    signed: SignedManifest | None = Field(
        default=None,
        description="The artifact's manifest signed with the fleet key (shared.manifests); an "
        "agent with a pinned fleet key refuses the artifact without a valid one.",
    )


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


# --- facts -----------------------------------------------------------------------------------


class FactSource(WireModel):
    """Whether one facts source answered, and why not when it did not."""

    available: bool
    reason: str | None = Field(default=None, description="Why the source is absent.")


class JetsonFacts(WireModel):
    """Jetson-specific facts (filled by the probe, or by a simulated profile)."""

    module: str | None = None
    part_number: str | None = None
    soc: str | None = None
    jetpack: str | None = None
    l4t: str | None = None
    power_mode: str | None = None
    power_mode_id: int | None = None
    jetson_clocks: bool | None = None
    dla_cores: int | None = None


class GpuFacts(WireModel):
    """The accelerator the engines target."""

    name: str | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    memory_total_bytes: int | None = None
    cuda_version: str | None = None
    driver_version: str | None = None


class DeviceFacts(WireModel):
    """What a gateway is: hardware, OS, runtimes. Absent sources say why."""

    schema_: Literal["jetfleet/facts/1"] = Field(default=SCHEMA_FACTS, alias="schema")
    hostname: str
    os: str
    arch: str
    cpu_model: str | None = None
    cpu_count: int | None = None
    memory_total_bytes: int | None = None
    python_version: str | None = None
    onnxruntime_version: str | None = None
    tensorrt_version: str | None = None
    tensorrt_python: str | None = Field(
        default=None,
        description="Interpreter the TensorRT host runs under (it imports tensorrt); None when "
        "none can. Added within jetfleet/facts/1: older documents lack it.",
    )
    tensorrt_python_version: str | None = Field(
        default=None, description="That interpreter's Python version (3.8 on JetPack 5.1)."
    )
    jetson: JetsonFacts | None = None
    gpu: GpuFacts | None = None
    sources: dict[str, FactSource] = Field(
        default_factory=dict, description="Per source (psutil, jetson, tensorrt, nvml...)."
    )
    simulated: bool = Field(
        default=False, description="True when a simulated profile supplied hardware facts."
    )
    profile: str | None = Field(default=None, description="Simulated profile name, if any.")


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


# --- telemetry -------------------------------------------------------------------------------


class ModelStats(WireModel):
    """Inference counters of one model since the previous sample (a window, not a total)."""

    name: str = Field(pattern=MODEL_NAME_PATTERN)
    version: str | None = None
    requests: int = Field(ge=0)
    errors: int = Field(ge=0)
    latency_p50_ms: float | None = Field(default=None, ge=0)
    latency_p95_ms: float | None = Field(default=None, ge=0)
    latency_p99_ms: float | None = Field(default=None, ge=0)
    latency_buckets: tuple[NonNegativeInt, ...] = Field(
        default=(),
        description="Successful requests per latency bucket in this window (not cumulative): "
        "bucket i counts latency_bounds_ms[i-1] < ms <= latency_bounds_ms[i], the last one those "
        "above the last bound; empty when the agent keeps no histogram.",
    )
    engine_key: str | None = Field(default=None, description="Engine key serving this model now.")


class Telemetry(WireModel):
    """One health sample. ``sample_id`` is the idempotency key: the controller stores it once."""

    schema_: Literal["jetfleet/telemetry/1"] = Field(default=SCHEMA_TELEMETRY, alias="schema")
    device_id: DeviceId = Field(pattern=DEVICE_ID_PATTERN)
    sample_id: str = Field(min_length=1, max_length=128)
    ts: datetime
    interval_s: float = Field(gt=0, description="Window the counters cover.")
    cpu_percent: float = Field(ge=0)
    memory_used_bytes: int = Field(ge=0)
    memory_total_bytes: int = Field(ge=0)
    models: tuple[ModelStats, ...] = ()
    gpu_load_percent: float | None = Field(
        default=None, ge=0, description="GPU load in percent (mean over GPUs on a dGPU host)."
    )
    gpu_memory_used_bytes: int | None = Field(
        default=None, ge=0, description="Discrete GPU memory in use, bytes (summed over GPUs)."
    )
    gpu_memory_total_bytes: int | None = Field(
        default=None, ge=0, description="Discrete GPU memory in total, bytes (summed over GPUs)."
    )
    memory_available_bytes: int | None = Field(
        default=None,
        ge=0,
        description="Memory available to new allocations, bytes (shared by CPU and GPU on Jetson).",
    )
    nvmap_used_bytes: int | None = Field(
        default=None, ge=0, description="Jetson NvMapMemUsed (GPU allocations), bytes."
    )
    lfb_blocks: int | None = Field(
        default=None, ge=0, description="Jetson largest free block, in blocks of lfb_block_bytes."
    )
    lfb_block_bytes: int | None = Field(
        default=None, ge=0, description="Size of one lfb block, bytes (4 MiB on Jetson)."
    )
    largest_free_block_bytes: int | None = Field(
        default=None,
        ge=0,
        description="Largest contiguous free memory block, bytes (fragmentation headroom).",
    )
    disk_free_bytes: int | None = Field(
        default=None, ge=0, description="Free bytes on the file system of the state directory."
    )
    net_sent_bytes: int | None = Field(
        default=None, ge=0, description="Bytes sent on all interfaces during the window."
    )
    net_recv_bytes: int | None = Field(
        default=None, ge=0, description="Bytes received on all interfaces during the window."
    )
    queue_depth: int | None = Field(
        default=None, ge=0, description="Inference requests waiting or running now."
    )
    swaps: int | None = Field(default=None, ge=0, description="Engine swaps during the window.")
    temperatures_c: dict[str, float] = Field(
        default_factory=dict, description="Temperature per sensor or GPU, degrees Celsius."
    )
    temperature_max_c: float | None = Field(
        default=None, description="Hottest of temperatures_c, degrees Celsius."
    )
    power_mw: float | None = Field(
        default=None, ge=0, description="Total board (Jetson) or GPU (dGPU) power, milliwatts."
    )
    power_rails_mw: dict[str, float] = Field(
        default_factory=dict, description="Power per rail (INA3221 hwmon / jtop), milliwatts."
    )
    power_mode: str | None = Field(default=None, description="Jetson nvpmodel mode name.")
    jetson_clocks: bool | None = Field(
        default=None, description="Whether jetson_clocks pins the clocks at their maximum."
    )
    latency_bounds_ms: tuple[float, ...] | None = Field(
        default=None,
        description="Upper bounds of the models' latency_buckets, milliseconds, ascending.",
    )
    sources_absent: dict[str, str] = Field(
        default_factory=dict,
        description="Each configured telemetry source that did not answer → why.",
    )
    spool_dropped: int | None = Field(
        default=None,
        ge=0,
        description="Messages the agent's offline spool dropped to stay within its bounds, ever.",
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
