"""The fleet as dashboards see it: each device with its health, reasons and latest vitals.

One place assembles it (devices + recent-window vitals + newest sample, three queries), so the
JSON API, ``/metrics`` and the HTML pages agree on every number.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from controller.db.repository import Repository
from controller.db.schema import utcnow
from controller.db.telemetry_store import TelemetryStore
from controller.errors import InvalidInput
from controller.fleet.health import DeviceHealth, HealthState, Vitals, assess
from controller.records import DeviceRecord
from controller.settings import HealthThresholds


@dataclass(frozen=True)
class DeviceRow:
    """One device on the dashboard."""

    device: DeviceRecord
    health: DeviceHealth
    vitals: Vitals | None
    latest: dict[str, Any] | None
    engines: list[dict[str, Any]] = field(default_factory=list)

    @property
    def hardware(self) -> str:
        facts = self.device.device_facts
        if facts is None:
            return "facts unreadable" if self.device.facts_unreadable else "?"
        module = facts.jetson.module if facts.jetson is not None else None
        gpu = facts.gpu.name if facts.gpu is not None else None
        return module or gpu or facts.cpu_model or "?"

    def as_json(self) -> dict[str, Any]:
        v = self.vitals
        latest = self.latest or {}
        return {
            "id": self.device.id,
            "labels": self.device.labels,
            "online": self.device.online,
            "last_seen": self.device.last_seen.isoformat() if self.device.last_seen else None,
            "health": self.health.state.value,
            "reasons": list(self.health.reasons),
            "hardware": self.hardware,
            "cpu_percent": latest.get("cpu_percent"),
            "gpu_load_percent": latest.get("gpu_load_percent"),
            "temperature_c": latest.get("temperature_max_c"),
            "power_mw": latest.get("power_mw"),
            "memory_headroom": v.memory_headroom if v else None,
            "error_rate": v.error_rate if v else None,
            "requests": v.requests if v else 0,
            "p99_ms": v.p99_ms if v else None,
            "engines": self.engines,
            "agent_version": self.device.agent_version,
            "agent_update": (
                None
                if self.device.agent_update is None
                else self.device.agent_update.model_dump(mode="json")
            ),
        }


class FleetView:
    """Reads the fleet's health on demand (nothing cached: the database is the truth)."""

    def __init__(
        self,
        repo: Repository,
        store: TelemetryStore,
        thresholds: HealthThresholds,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.repo = repo
        self.store = store
        self.thresholds = thresholds
        self._clock = clock

    def now(self) -> datetime:
        return self._clock()

    def rows(self) -> list[DeviceRow]:
        """Every device, sorted by id."""
        now = self._clock()
        vitals = self.store.vitals(now - timedelta(seconds=self.thresholds.window_s))
        latest = self.store.latest_all()
        return [self._row(d, vitals.get(d.id), latest.get(d.id), now) for d in self.repo.devices()]

    def row(self, device_id: str) -> DeviceRow:
        """One device (``NotFound`` when unknown)."""
        now = self._clock()
        device = self.repo.device(device_id)
        vitals = self.store.vitals(now - timedelta(seconds=self.thresholds.window_s))
        return self._row(device, vitals.get(device_id), self.store.latest(device_id), now)

    def _row(
        self,
        device: DeviceRecord,
        vitals: Vitals | None,
        latest: dict[str, Any] | None,
        now: datetime,
    ) -> DeviceRow:
        health = assess(
            online=device.online,
            last_seen=device.last_seen,
            vitals=vitals,
            now=now,
            thresholds=self.thresholds,
        )
        engines = [
            {
                "model": s.name,
                "version": s.active_version,
                "phase": s.phase.value,
                "engine_key": s.engine_key,
                "runtime": (
                    f"{s.runtime} (fallback: {s.fallback_reason})"
                    if s.fallback_reason
                    else s.runtime
                ),
            }
            for s in device.reported
        ]
        known = {e["model"] for e in engines}
        for stats in (latest or {}).get("models") or []:
            if stats.get("name") not in known:  # serving, seen in telemetry only
                engines.append(
                    {
                        "model": stats.get("name"),
                        "version": stats.get("version"),
                        "phase": "serving",
                        "engine_key": stats.get("engine_key"),
                        "runtime": None,
                    }
                )
        return DeviceRow(device, health, vitals, latest, engines)


def health_counts(rows: list[DeviceRow]) -> dict[str, int]:
    """Devices per health state, every state present (zero when none)."""
    counts = Counter(r.health.state.value for r in rows)
    return {state.value: counts.get(state.value, 0) for state in HealthState}


def filter_rows(rows: list[DeviceRow], health: str | None, label: str | None) -> list[DeviceRow]:
    """Rows whose health is ``health`` and whose labels hold ``key=value`` (each optional)."""
    if label:
        key, sep, value = label.partition("=")
        if not sep or not key:
            raise InvalidInput(f"label filter {label!r} must look like key=value")
        rows = [r for r in rows if r.device.labels.get(key) == value]
    if health:
        rows = [r for r in rows if r.health.state.value == health]
    return rows
