"""HTTP request and response bodies of the controller's API (``/api/v1``).

Kept apart from the routes so the routes and the tests share one definition. Services never
build these: they return :mod:`controller.records` types and :mod:`controller.api.convert`
makes the bodies.
Errors use FastAPI's shape: ``{"detail": "one line a person can act on"}``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from controller.fleet.config_layers import SCOPE_PATTERN
from controller.fleet.selectors import SELECTOR_PATTERN
from controller.trust.labels import LABELS_SCHEMA
from shared.agent_releases import AgentUpdateStatus
from shared.delegate import DelegateConfig
from shared.facts import DeviceFacts
from shared.messages import SlotStatus
from shared.telemetry import ModelStats
from shared.topics import DEVICE_ID_PATTERN
from shared.wire_model import MODEL_NAME_PATTERN, VERSION_PATTERN


def rule(pattern: str) -> dict[str, Any]:
    """``json_schema_extra`` declaring the pattern a field's server-side check uses."""
    return {"pattern": pattern}


SELECTOR = rule(SELECTOR_PATTERN)
ONE_TARGET = ConfigDict(
    extra="forbid",
    json_schema_extra={
        "oneOf": [
            {"properties": {"device": {"type": "string"}}, "required": ["device"]},
            {"properties": {"selector": {"type": "string"}}, "required": ["selector"]},
        ]
    },
)
"""A body that targets exactly one of ``device`` and ``selector`` (the other absent or null)."""


class ApiModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TensorSpec(ApiModel):
    """One input or output of an ONNX model (dims: int, or a name for a dynamic dim)."""

    name: str
    datatype: str = Field(description="KServe v2 datatype, e.g. FP32.")
    shape: list[int | str]


class DelegationSummary(ApiModel):
    """How much of a model one TensorRT version can take (the static analysis' verdict)."""

    verdict: Literal["full", "partial", "not_worth"]
    line: str = Field(description="One line for people, e.g. 'partial: 2 partitions, ...'.")
    flop_share: float | None = Field(description="Share of estimated FLOPs on the GPU (0-1).")
    node_share: float | None = Field(description="Share of nodes on the GPU (0-1).")
    tensorrt: Literal["builds", "falls_back"] | None = Field(
        default=None,
        description="The agent's TensorRT build of the whole model, predicted: builds, or "
        "falls_back (the slot serves it on ONNX Runtime); null for reports stored before the "
        "prediction existed.",
    )
    tensorrt_reason: str | None = Field(
        default=None, description="Why it falls back: the first refusal, in TensorRT's words."
    )


class WarmupGiven(ApiModel):
    """Shapes and values given at push (``--shape``, ``--value``, ``--inputs``)."""

    shapes: dict[str, list[int]] = Field(default_factory=dict)
    values: dict[str, float] = Field(default_factory=dict)
    inputs_sha256: str | None = None


class ModelVersionOut(ApiModel):
    """A stored model version: GET/PUT /api/v1/models/{name}/versions/{version}."""

    name: str
    version: str
    sha256: str
    size: int
    created_at: datetime
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    has_qdq: bool = Field(
        default=False, description="The graph has QuantizeLinear/DequantizeLinear nodes."
    )
    download_url: str = Field(description="Artifact URL (absolute, from the public base URL).")
    delegation: dict[str, DelegationSummary] = Field(
        default_factory=dict,
        description="Static delegate analysis per TensorRT version (8.5, 8.6, 10.1); empty "
        "until analysis_state is done.",
    )
    analysis_state: Literal["pending", "done", "failed"] = Field(
        default="done",
        description="pending: the analysis runs in the background after the push (poll this "
        "version); done: see delegation; failed: see analysis_error.",
    )
    analysis_error: str | None = Field(
        default=None, description="Why the analysis failed (analysis_state failed)."
    )
    warmup_given: WarmupGiven = Field(
        default_factory=lambda: WarmupGiven(),
        description="Inputs the operator gave at push for warm-up, references and validation.",
    )
    reference_error: str | None = Field(
        default=None,
        description="Why reference outputs could not be computed at push (null: computed, or "
        "uploaded).",
    )
    warmup_unknown: bool = Field(
        default=False,
        description="ONNX Runtime failed on the inputs used at push: deploys and rollouts are "
        "refused (409) until inputs the model accepts are given (push again with shape/value "
        "or inputs_sha256) or reference outputs are uploaded.",
    )


class ModelOut(ApiModel):
    """A model and its versions, oldest first: GET /api/v1/models[/{name}]."""

    name: str
    versions: list[ModelVersionOut]


class DesiredSlotOut(ApiModel):
    """What the controller wants a device to serve in one slot."""

    name: str
    version: str
    sha256: str
    delegate: DelegateConfig
    config: str | None = Field(
        default=None, description="Named config the delegate was resolved from (None: default)."
    )


class DeviceOut(ApiModel):
    """A device as the fleet sees it: GET /api/v1/devices[/{id}]."""

    id: str
    labels: dict[str, str]
    online: bool
    last_seen: datetime | None
    desired_generation: int
    observed_generation: int | None
    desired: list[DesiredSlotOut]
    reported: list[SlotStatus]
    facts: DeviceFacts | None
    hardware_class: str | None = Field(
        default=None, description="e.g. jetson-orin-nano-8gb/jp6.2; None until facts arrive."
    )
    pinned_class: str | None = Field(
        default=None,
        description="The class the device may upload engines for: its first report's, or one "
        "an operator accepted (POST /api/v1/devices/{id}/accept-class).",
    )
    class_changed: bool = Field(
        default=False,
        description="It now reports another class than it is pinned to: its engine uploads "
        "are refused until an operator accepts the change.",
    )
    serve_url: str | None
    agent_version: str | None = Field(
        default=None, description="The agent release it last reported running."
    )
    agent_update: AgentUpdateStatus | None = Field(
        default=None, description="Its latest agent update (phase, release, error)."
    )


class DeviceLabelsIn(ApiModel):
    """PUT /api/v1/devices/{id}/labels: the device's whole label set (``{}`` clears it)."""

    labels: dict[str, str] = Field(
        description="What selectors match the device by; devices cannot set their own.",
        json_schema_extra=LABELS_SCHEMA,
    )


class DeployRequest(ApiModel):
    """POST /api/v1/deployments: a model version to one device or to a label selector."""

    model_config = ONE_TARGET

    model: str = Field(json_schema_extra=rule(MODEL_NAME_PATTERN))
    version: str = Field(json_schema_extra=rule(VERSION_PATTERN))
    device: str | None = Field(default=None, json_schema_extra=rule(DEVICE_ID_PATTERN))
    selector: str | None = Field(
        default=None, description="k=v[,k2=v2]; all must match.", json_schema_extra=SELECTOR
    )
    delegate: DelegateConfig | None = None
    config: str | None = Field(
        default=None,
        json_schema_extra=rule(MODEL_NAME_PATTERN),
        description="Named delegate config, resolved per target device (instead of delegate).",
    )


class UndeployRequest(ApiModel):
    """POST /api/v1/deployments/remove: drop the slot of ``model`` from the targets."""

    model_config = ONE_TARGET

    model: str = Field(json_schema_extra=rule(MODEL_NAME_PATTERN))
    device: str | None = Field(default=None, json_schema_extra=rule(DEVICE_ID_PATTERN))
    selector: str | None = Field(default=None, json_schema_extra=SELECTOR)


class DeviceChange(ApiModel):
    """One device touched by a deploy/undeploy and the generation it was given."""

    device_id: str
    generation: int
    changed: bool = Field(description="False when the device already had this exact slot.")


class DeploymentResult(ApiModel):
    devices: list[DeviceChange]


class TelemetrySampleOut(ApiModel):
    """GET /api/v1/devices/{id}/telemetry?limit=N (newest first)."""

    sample_id: str
    ts: datetime
    cpu_percent: float
    memory_used_bytes: int
    memory_total_bytes: int
    models: list[ModelStats]


class EventOut(ApiModel):
    """GET /api/v1/devices/{id}/events?limit=N (newest first)."""

    event_id: str
    ts: datetime
    kind: str
    slot: str | None
    message: str


class IngestStats(ApiModel):
    """GET /api/v1/ingest: counts of inbound MQTT messages since the controller started."""

    accepted: int
    rejected: int
    rejected_by_channel: dict[str, int]
    last_rejection: str | None = Field(description="The last rejection's log line.")


class Health(ApiModel):
    """GET /healthz: public, so it says what answers and nothing of where."""

    status: Literal["ok"]
    database: str = Field(description="The database's kind: sqlite or postgresql.")
    broker: str = Field(description="The broker's scheme: mqtt or mqtts.")


class ConfigLayerIn(ApiModel):
    """PUT /api/v1/configs/{name}: one layer's scope and partial DelegateConfig values."""

    scope: str = Field(
        description="default | class=<hardware class> | selector=k=v | device=ID",
        json_schema_extra=rule(SCOPE_PATTERN),
    )
    values: dict[str, Any] = Field(default_factory=dict, description="DelegateConfig fields.")


class ConfigLayerOut(ApiModel):
    """A stored layer (layers of one config are listed in creation order)."""

    scope: str
    values: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class ConfigOut(ApiModel):
    """A named delegate config: GET /api/v1/configs[/{name}]."""

    name: str
    layers: list[ConfigLayerOut]


class ConfigChange(ApiModel):
    """The config after a PUT/DELETE, and the devices whose slots were re-resolved."""

    config: ConfigOut | None = Field(description="None when its last layer was deleted.")
    devices: list[DeviceChange]


class ResolvedConfigOut(ApiModel):
    """GET /api/v1/configs/{name}/resolve: the effective config of one model on one device."""

    config: str | None = Field(description="The named config (None: fleet-wide default).")
    device_id: str
    model: str
    version: str
    hardware_class: str | None
    delegate: DelegateConfig
    provenance: dict[str, str] = Field(
        description="Per field (onnxruntime.<option> for ORT options): default, class=..., "
        "selector=... or device=..., the scope that set it; shapes (and default_shapes) also "
        "name the default profiles taken from the version's warm-up shapes, and their source."
    )
    problems: list[str] = Field(description="What check_config says to fix before a build.")
