"""Read side of telemetry: fleet summary, device health and time series, Prometheus ``/metrics``.

``health_router(services)`` is the one router ``create_app`` includes (at the root): it serves
``/api/v1/fleet/...``, ``/api/v1/devices/{id}/health|series``, ``/metrics`` and the built-in
dashboard under ``/dashboard``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel

from controller.api.params import DeviceIdPath, LabelFilterQuery
from controller.dashboard.routes import dashboard_router
from controller.dashboard.view import FleetView, filter_rows, health_counts
from controller.db.telemetry_reads import METRICS, ROLLUPS
from controller.errors import DatabaseError
from controller.services import Services
from shared.timestamps import Timestamp

PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SOURCES = ("raw", "rollup", "auto")
"""Where a series is read from: samples, minute rollups, or whichever covers the range."""


class FleetSummary(BaseModel):
    """Health counts and every device's row."""

    generated_at: datetime
    counts: dict[str, int]
    devices: list[dict[str, Any]]
    thresholds: dict[str, float]


class Series(BaseModel):
    """One metric of one device over time: ``points`` are ``[time, value]``."""

    device_id: str
    metric: str
    rollup: str
    source: str
    step_s: float
    since: datetime
    until: datetime
    points: list[tuple[datetime, float]]


def fleet_view(services: Services) -> FleetView:
    """The view over ``services``; :class:`DatabaseError` when telemetry is not wired."""
    if services.telemetry is None:
        raise DatabaseError("telemetry storage is not wired into this controller")
    return FleetView(services.repo, services.telemetry, services.health)


def health_router(services: Services) -> APIRouter:
    """All health routes; included once by ``create_app``."""
    router = APIRouter()
    view = fleet_view(services) if services.telemetry is not None else None

    def need_view() -> FleetView:
        if view is None:
            raise DatabaseError("telemetry storage is not wired into this controller")
        return view

    @router.get("/api/v1/fleet/summary", tags=["health"])
    def fleet_summary(health: str | None = None, label: LabelFilterQuery = None) -> FleetSummary:
        """Counts per health state and every device (filter by ``health`` and ``label=k=v``)."""
        v = need_view()
        rows = v.rows()
        shown = filter_rows(rows, health, label)
        return FleetSummary(
            generated_at=v.now(),
            counts=health_counts(rows),
            devices=[r.as_json() for r in shown],
            thresholds={k: float(x) for k, x in vars(v.thresholds).items()},
        )

    @router.get("/api/v1/devices/{device_id}/health", tags=["health"])
    def device_health(device_id: DeviceIdPath) -> dict[str, Any]:
        """One device's health, reasons and latest vitals."""
        return need_view().row(device_id).as_json()

    @router.get("/api/v1/devices/{device_id}/series", tags=["health"])
    def device_series(
        device_id: DeviceIdPath,
        metric: str = Query(
            description=f"One of: {', '.join(METRICS)}", json_schema_extra={"enum": list(METRICS)}
        ),
        since: Timestamp | None = None,
        until: Timestamp | None = None,
        window_s: float = Query(default=3600, gt=0, description="Range when 'since' is absent."),
        step: float = Query(default=60, gt=0, description="Seconds per point."),
        rollup: str = Query(
            default="avg",
            description=f"One of: {', '.join(ROLLUPS)}",
            json_schema_extra={"enum": list(ROLLUPS)},
        ),
        source: str = Query(
            default="auto",
            description="raw, rollup or auto.",
            json_schema_extra={"enum": list(SOURCES)},
        ),
    ) -> Series:
        """A metric of one device, bucketed by ``step`` and aggregated by ``rollup``."""
        v = need_view()
        v.repo.device(device_id)
        end = _aware(until) if until else v.now()
        start = _aware(since) if since else end - timedelta(seconds=window_s)
        chosen = source
        if source == "auto":
            retention = services.batcher.retention if services.batcher else None
            raw_kept = retention.raw_s if retention else 86400.0
            chosen = "raw" if start >= v.now() - timedelta(seconds=raw_kept) else "rollup"
        points = v.store.series(device_id, metric, start, end, step, rollup, chosen)
        return Series(
            device_id=device_id,
            metric=metric,
            rollup=rollup,
            source=chosen,
            step_s=step,
            since=start,
            until=end,
            points=points,
        )

    @router.get(
        "/metrics",
        tags=["health"],
        response_class=Response,
        responses={200: {"content": {PROMETHEUS_TYPE: {"schema": {"type": "string"}}}}},
    )
    def metrics() -> Response:
        """Prometheus text exposition (format 0.0.4)."""
        return Response(prometheus_text(services, need_view()), media_type=PROMETHEUS_TYPE)

    if view is not None:
        router.include_router(dashboard_router(view))
    return router


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


# --- Prometheus ------------------------------------------------------------------------------


class _Exposition:
    """Builds the text format: HELP/TYPE once per family, then its samples."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, value: float, labels: dict[str, str] | None = None) -> None:
        rendered = ""
        if labels:
            rendered = "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"
        self.lines.append(f"{name}{rendered} {_number(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def prometheus_text(services: Services, view: FleetView) -> str:
    """Devices by health, per-device vitals, rollouts by state, ingest counters."""
    out = _Exposition()
    rows = view.rows()
    out.family("jetfleet_devices", "gauge", "Devices per health state.")
    for state, count in health_counts(rows).items():
        out.sample("jetfleet_devices", count, {"health": state})
    out.family("jetfleet_device_health", "gauge", "1 for the device's current health state.")
    for r in rows:
        out.sample(
            "jetfleet_device_health", 1, {"device": r.device.id, "health": r.health.state.value}
        )
    per_device = [
        ("jetfleet_device_cpu_percent", "CPU load of the newest sample, percent.", "cpu_percent"),
        ("jetfleet_device_gpu_load_percent", "GPU load, percent.", "gpu_load_percent"),
        ("jetfleet_device_temperature_celsius", "Hottest sensor, °C.", "temperature_c"),
        ("jetfleet_device_power_milliwatts", "Board or GPU power, mW.", "power_mw"),
        ("jetfleet_device_memory_headroom_ratio", "Available / total memory.", "memory_headroom"),
        ("jetfleet_device_error_ratio", "Errors / requests over the window.", "error_rate"),
        ("jetfleet_device_latency_p99_seconds", "Worst p99 latency over the window.", "p99_ms"),
    ]
    for name, help_text, key in per_device:
        out.family(name, "gauge", help_text)
        scale = 1e-3 if name.endswith("_seconds") else 1.0  # Prometheus wants base units
        for r in rows:
            value = r.as_json().get(key)
            if value is not None:
                out.sample(name, float(value) * scale, {"device": r.device.id})
    out.family("jetfleet_rollouts", "gauge", "Rollouts per state.")
    for state, count in sorted(view.repo.rollouts_by_state().items()):
        out.sample("jetfleet_rollouts", count, {"state": state})
    ingest = services.ingest.stats()
    out.family("jetfleet_ingest_accepted_total", "counter", "Messages accepted from agents.")
    out.sample("jetfleet_ingest_accepted_total", ingest.accepted)
    out.family("jetfleet_ingest_rejected_total", "counter", "Messages rejected, by channel.")
    for channel, count in sorted(ingest.rejected_by_channel.items()):
        out.sample("jetfleet_ingest_rejected_total", count, {"channel": channel})
    if not ingest.rejected_by_channel:
        out.sample("jetfleet_ingest_rejected_total", 0, {"channel": "telemetry"})
    guarded = services.ingest.guard_stats()
    out.family(
        "jetfleet_ingest_samples_guarded_total",
        "counter",
        "Telemetry samples the sample guard re-dated (dated ahead) or refused (stale, over the "
        "per-device rate), by reason.",
    )
    for reason in ("redated", "stale", "over_rate"):
        out.sample(
            "jetfleet_ingest_samples_guarded_total", getattr(guarded, reason), {"reason": reason}
        )
    if services.batcher is not None:
        b = services.batcher.stats()
        for name, kind, help_text, value in [
            (
                "jetfleet_ingest_samples_persisted_total",
                "counter",
                "Samples stored.",
                b.samples_persisted,
            ),
            (
                "jetfleet_ingest_samples_duplicate_total",
                "counter",
                "Redelivered samples skipped.",
                b.samples_duplicate,
            ),
            (
                "jetfleet_ingest_events_persisted_total",
                "counter",
                "Events stored.",
                b.events_persisted,
            ),
            ("jetfleet_ingest_batches_total", "counter", "Batches written.", b.batches),
            (
                "jetfleet_ingest_write_errors_total",
                "counter",
                "Failed batch writes.",
                b.write_errors,
            ),
            (
                "jetfleet_ingest_dropped_total",
                "counter",
                "Messages the database refused.",
                b.dropped,
            ),
            (
                "jetfleet_ingest_backpressure_seconds_total",
                "counter",
                "Time ingest waited for queue room.",
                b.blocked_s,
            ),
            ("jetfleet_ingest_queue_depth", "gauge", "Messages waiting to be written.", b.queued),
            ("jetfleet_ingest_queue_capacity", "gauge", "Queue bound.", b.capacity),
            (
                "jetfleet_ingest_rate_per_second",
                "gauge",
                "Samples stored per second, recent.",
                b.rate_per_s,
            ),
        ]:
            out.family(name, kind, help_text)
            out.sample(name, value)
    return out.text()
