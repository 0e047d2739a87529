"""Records → API response bodies."""

from __future__ import annotations

from controller.api.schemas import DesiredSlotOut, DeviceOut, EventOut, TelemetrySampleOut
from controller.fleet.configs import device_hardware_class
from controller.records import DeviceRecord, EventEntry, TelemetryRecord
from shared.messages import DeviceFacts, ModelStats, SlotStatus


def device_out(d: DeviceRecord) -> DeviceOut:
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
        reported=[SlotStatus.model_validate(s) for s in d.reported_slots],
        facts=DeviceFacts.model_validate(d.facts) if d.facts else None,
        hardware_class=device_hardware_class(d.facts),
        serve_url=d.serve_url,
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
