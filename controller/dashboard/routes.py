"""Routes of the built-in dashboard (HTML pages and the vendored static files)."""

from __future__ import annotations

from datetime import timedelta
from importlib import resources

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, Response

from controller.dashboard import pages
from controller.dashboard.view import FleetView, filter_rows, health_counts
from controller.errors import InvalidInput, NotFound

_STATIC = {"jfchart.js": "text/javascript", "dashboard.css": "text/css"}
_CHARTS: list[tuple[str, str, dict[str, tuple[str, str]]]] = [
    ("Latency", "ms", {"p50": ("latency_p50_ms", "avg"), "p99": ("latency_p99_ms", "max")}),
    ("Throughput", "req/s", {"requests": ("throughput_rps", "avg")}),
    ("Load", "%", {"CPU": ("cpu_percent", "avg"), "GPU": ("gpu_load_percent", "avg")}),
    ("Temperature", "°C", {"hottest": ("temperature_c", "max")}),
    ("Power", "mW", {"total": ("power_mw", "avg")}),
    ("Memory available", "bytes", {"available": ("memory_available_bytes", "min")}),
]


def dashboard_router(view: FleetView) -> APIRouter:
    """``/dashboard``, ``/dashboard/devices/{id}``, ``/dashboard/rollouts``, static files."""
    router = APIRouter(tags=["dashboard"], include_in_schema=False)

    @router.get("/dashboard", response_class=HTMLResponse)
    def fleet(health: str = "", label: str = "", sort: str = "health") -> HTMLResponse:
        if sort not in pages.SORT_KEYS:
            raise InvalidInput(f"cannot sort by {sort!r}: use one of {', '.join(pages.SORT_KEYS)}")
        rows = view.rows()
        shown = pages.sort_rows(filter_rows(rows, health or None, label or None), sort)
        filters = {k: v for k, v in (("health", health), ("label", label)) if v}
        return HTMLResponse(pages.fleet_page(shown, health_counts(rows), filters, sort))

    @router.get("/dashboard/devices/{device_id}", response_class=HTMLResponse)
    def device(
        device_id: str, window_s: float = Query(default=900, gt=0, le=30 * 86400)
    ) -> HTMLResponse:
        row = view.row(device_id)
        end = view.now()
        start = end - timedelta(seconds=window_s)
        step = max(window_s / 300, 1.0)
        source = "raw" if window_s <= 86400 else "rollup"
        charts = []
        for title, unit, lines in _CHARTS:
            series = {
                name: view.store.series(device_id, metric, start, end, step, rollup, source)
                for name, (metric, rollup) in lines.items()
            }
            charts.append(pages.chart(title, unit, series))
        events = view.repo.events(device_id, 20)
        return HTMLResponse(pages.device_page(row, charts, events, window_s))

    @router.get("/dashboard/rollouts", response_class=HTMLResponse)
    def rollouts() -> HTMLResponse:
        return HTMLResponse(pages.rollouts_page(view.repo.rollout_progress()))

    @router.get("/dashboard/static/{name}")
    def static(name: str) -> Response:
        if name not in _STATIC:
            raise NotFound(f"no dashboard file {name!r}")
        data = (
            resources.files("controller.dashboard").joinpath("static").joinpath(name).read_bytes()
        )
        return Response(data, media_type=_STATIC[name], headers={"Cache-Control": "max-age=300"})

    return router
