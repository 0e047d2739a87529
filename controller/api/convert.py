"""Records → API response bodies: the one place the services' records become HTTP schemas."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from controller.api.schemas import (
    ConfigChange,
    ConfigLayerOut,
    ConfigOut,
    DelegationSummary,
    DeploymentResult,
    DesiredSlotOut,
    DeviceChange,
    DeviceOut,
    EventOut,
    IngestStats,
    ModelOut,
    ModelVersionOut,
    ResolvedConfigOut,
    TelemetrySampleOut,
    TensorSpec,
    WarmupGiven,
)
from controller.fleet.configs import device_hardware_class
from controller.records import (
    ConfigUpdate,
    Deployment,
    DeviceRecord,
    EventEntry,
    IngestCounts,
    NamedConfig,
    ResolvedConfig,
    SlotChange,
    TelemetryRecord,
    VersionView,
)
from shared.telemetry import ModelStats


def device_out(d: DeviceRecord) -> DeviceOut:
    reported_class = device_hardware_class(d.device_facts)
    return DeviceOut(
        id=d.id,
        labels=d.labels,
        online=d.online,
        last_seen=d.last_seen,
        desired_generation=d.desired_generation,
        observed_generation=d.observed_generation,
        desired=[
            DesiredSlotOut(
                name=s.name,
                version=s.version,
                sha256=s.sha256,
                delegate=s.delegate,
                config=s.config,
            )
            for s in d.slots
        ],
        reported=list(d.reported),
        facts=d.device_facts,
        hardware_class=reported_class,
        pinned_class=d.pinned_class,
        class_changed=None not in (reported_class, d.pinned_class)
        and reported_class != d.pinned_class,
        serve_url=d.serve_url,
        agent_version=d.agent_version,
        agent_update=d.agent_update,
    )


def telemetry_out(t: TelemetryRecord) -> TelemetrySampleOut:
    return TelemetrySampleOut(
        sample_id=t.sample_id,
        ts=t.ts,
        cpu_percent=t.cpu_percent,
        memory_used_bytes=t.memory_used_bytes,
        memory_total_bytes=t.memory_total_bytes,
        models=[ModelStats.model_validate(m) for m in t.models],
    )


def event_out(e: EventEntry) -> EventOut:
    return EventOut(event_id=e.event_id, ts=e.ts, kind=e.kind, slot=e.slot, message=e.message)


def version_out(v: VersionView) -> ModelVersionOut:
    r = v.record
    return ModelVersionOut(
        name=r.model,
        version=r.version,
        sha256=r.sha256,
        size=r.size,
        created_at=r.created_at,
        inputs=[TensorSpec.model_validate(s) for s in r.inputs],
        outputs=[TensorSpec.model_validate(s) for s in r.outputs],
        has_qdq=r.has_qdq,
        download_url=v.download_url,
        delegation={trt: _summary(report) for trt, report in sorted(r.analysis.items())},
        analysis_state=r.analysis_state,
        analysis_error=r.analysis_error,
        warmup_given=WarmupGiven.model_validate(r.warmup_given),
        reference_error=r.reference_error,
        warmup_unknown=r.warmup_unknown,
    )


def _summary(report: dict[str, Any]) -> DelegationSummary:
    """The verdict of one stored analysis report (controller.analysis.report's JSON)."""
    verdict, rates = report["verdict"], report["rates"]
    prediction = report.get("prediction") or {}
    reasons = prediction.get("reasons") or []
    return DelegationSummary(
        verdict=verdict["kind"],
        line=verdict["line"],
        flop_share=rates["flop_share"],
        node_share=rates["node_share"],
        tensorrt=prediction.get("tensorrt"),
        tensorrt_reason=reasons[0]
        if reasons and prediction.get("tensorrt") == "falls_back"
        else None,
    )


def model_out(name: str, versions: list[VersionView]) -> ModelOut:
    return ModelOut(name=name, versions=[version_out(v) for v in versions])


def config_out(c: NamedConfig) -> ConfigOut:
    return ConfigOut(
        name=c.name,
        layers=[
            ConfigLayerOut(
                scope=r.scope, values=r.values, created_at=r.created_at, updated_at=r.updated_at
            )
            for r in c.layers
        ],
    )


def deployment_out(d: Deployment) -> DeploymentResult:
    return DeploymentResult(devices=_device_changes(d.devices))


def config_change_out(u: ConfigUpdate) -> ConfigChange:
    return ConfigChange(
        config=config_out(u.config) if u.config is not None else None,
        devices=_device_changes(u.devices),
    )


def _device_changes(changes: Iterable[SlotChange]) -> list[DeviceChange]:
    return [
        DeviceChange(device_id=c.device_id, generation=c.generation, changed=c.changed)
        for c in changes
    ]


def resolved_out(r: ResolvedConfig) -> ResolvedConfigOut:
    return ResolvedConfigOut(
        config=r.config,
        device_id=r.device_id,
        model=r.model,
        version=r.version,
        hardware_class=r.hardware_class,
        delegate=r.delegate,
        provenance=r.provenance,
        problems=r.problems,
    )


def ingest_out(c: IngestCounts) -> IngestStats:
    return IngestStats(
        accepted=c.accepted,
        rejected=c.rejected,
        rejected_by_channel=c.rejected_by_channel,
        last_rejection=c.last_rejection,
    )
