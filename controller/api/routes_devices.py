"""``/api/v1/devices``: the fleet's devices, their labels, telemetry and events; ingest counters."""

from __future__ import annotations

from fastapi import APIRouter, Query

from controller.api.convert import device_out, event_out, ingest_out, telemetry_out
from controller.api.params import DeviceIdPath
from controller.api.schemas import (
    DeviceLabelsIn,
    DeviceOut,
    EventOut,
    IngestStats,
    TelemetrySampleOut,
)
from controller.errors import InvalidInput
from controller.services import Services
from controller.trust.labels import check_labels
from shared.topics import TopicError, check_device_id


def devices_router(services: Services) -> APIRouter:
    """The device routes over ``services.repo`` and the ingest counters."""
    router = APIRouter(tags=["devices"])

    @router.get("/devices")
    def list_devices() -> list[DeviceOut]:
        return [device_out(d) for d in services.repo.devices()]

    @router.get("/devices/{device_id}")
    def show_device(device_id: DeviceIdPath) -> DeviceOut:
        return device_out(services.repo.device(device_id))

    @router.put("/devices/{device_id}/labels")
    def set_device_labels(device_id: DeviceIdPath, body: DeviceLabelsIn) -> DeviceOut:
        """Replace the device's labels with the body's whole set (the operator's word; what the
        device reports is ignored)."""
        try:
            check_device_id(device_id)
        except TopicError as exc:
            raise InvalidInput(str(exc)) from exc
        services.repo.set_labels(device_id, check_labels(body.labels))
        return device_out(services.repo.device(device_id))

    @router.post("/devices/{device_id}/accept-class")
    def accept_device_class(device_id: DeviceIdPath) -> DeviceOut:
        """Pin the device to the hardware class it reports now (who may upload engines for it)."""
        services.repo.accept_class(device_id)
        return device_out(services.repo.device(device_id))

    @router.get("/devices/{device_id}/telemetry")
    def device_telemetry(
        device_id: DeviceIdPath, limit: int = Query(default=50, ge=1, le=10_000)
    ) -> list[TelemetrySampleOut]:
        return [telemetry_out(t) for t in services.repo.telemetry(device_id, limit)]

    @router.get("/devices/{device_id}/events")
    def device_events(
        device_id: DeviceIdPath, limit: int = Query(default=50, ge=1, le=10_000)
    ) -> list[EventOut]:
        return [event_out(e) for e in services.repo.events(device_id, limit)]

    @router.get("/ingest", tags=["ingest"])
    def ingest_stats() -> IngestStats:
        return ingest_out(services.ingest.stats())

    return router
