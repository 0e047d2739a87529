"""Device health, decided from presence, last contact and recent telemetry (pure, clock injected).

A device is ``offline`` when its presence says so (the agent's Last Will) or nothing arrived from
it for ``offline_after_s``; ``degraded`` when, over the recent window, its error rate, p99
latency, hottest temperature or memory headroom crosses a threshold; else ``healthy``. Every
verdict other than healthy carries the reasons, in words an operator can act on. The thresholds
are settings (:class:`controller.settings.HealthThresholds`, ``JETFLEET_HEALTH_*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from controller.records import Vitals as Vitals
from controller.settings import HealthThresholds


class HealthState(str, Enum):
    """The three states dashboards count."""

    HEALTHY = "healthy"
    DEGRADED = "degraded"
    OFFLINE = "offline"


@dataclass(frozen=True)
class DeviceHealth:
    """The verdict and why."""

    state: HealthState
    reasons: tuple[str, ...] = ()


def assess(
    *,
    online: bool,
    last_seen: datetime | None,
    vitals: Vitals | None,
    now: datetime,
    thresholds: HealthThresholds,
) -> DeviceHealth:
    """Health of one device at ``now``."""
    offline: list[str] = []
    if last_seen is None:
        offline.append("never seen")
    else:
        silent = (now - last_seen).total_seconds()
        if silent > thresholds.offline_after_s:
            offline.append(
                f"nothing received for {_duration(silent)} (limit {thresholds.offline_after_s:g} s)"
            )
        elif not online:
            offline.append("reported offline (agent disconnected)")
    if offline:
        return DeviceHealth(HealthState.OFFLINE, tuple(offline))
    reasons = degraded_reasons(vitals, thresholds) if vitals is not None else []
    if reasons:
        return DeviceHealth(HealthState.DEGRADED, tuple(reasons))
    return DeviceHealth(HealthState.HEALTHY)


def degraded_reasons(v: Vitals, t: HealthThresholds) -> list[str]:
    """Each threshold ``v`` crosses, as one sentence."""
    reasons: list[str] = []
    rate = v.error_rate
    if rate is not None and v.requests >= t.min_requests and rate > t.error_rate:
        reasons.append(
            f"error rate {rate:.1%} ({v.errors}/{v.requests} requests) above {t.error_rate:.1%}"
        )
    if v.p99_ms is not None and v.p99_ms > t.p99_ms:
        reasons.append(f"p99 latency {v.p99_ms:.0f} ms above {t.p99_ms:g} ms")
    if v.temperature_c is not None and v.temperature_c > t.temperature_c:
        reasons.append(f"temperature {v.temperature_c:.1f} °C above {t.temperature_c:g} °C")
    headroom = v.memory_headroom
    if headroom is not None and headroom < t.memory_headroom:
        reasons.append(
            f"memory headroom {headroom:.1%} ({_mib(v.memory_available_bytes)} free) below "
            f"{t.memory_headroom:.0%}"
        )
    return reasons


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _mib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**20:.0f} MiB"
