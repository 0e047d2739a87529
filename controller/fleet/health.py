"""Device health, decided from presence, last contact and recent telemetry (pure, clock injected).

A device is ``offline`` when its presence says so (the agent's Last Will) or nothing arrived from
it for ``offline_after_s``; ``degraded`` when, over the recent window, its error rate, p99
latency, hottest temperature or memory headroom crosses a threshold; else ``healthy``. Every
verdict other than healthy carries the reasons, in words an operator can act on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from enum import Enum

from controller.errors import InvalidInput

ENV_PREFIX = "JETFLEET_HEALTH_"


class HealthState(str, Enum):
    """The three states dashboards count."""

    HEALTHY = "healthy"
    DEGRADED = "degraded"
    OFFLINE = "offline"


@dataclass(frozen=True)
class Thresholds:
    """When a device stops being healthy; each can be set by ``JETFLEET_HEALTH_<NAME>``."""

    offline_after_s: float = 90.0
    """Nothing received for this long → offline (3 missed samples at the default 30 s)."""
    window_s: float = 300.0
    """The recent telemetry window the other thresholds are judged over."""
    error_rate: float = 0.05
    """Errors / requests above this → degraded."""
    min_requests: int = 20
    """Error rates over fewer requests than this are not judged (one error in two is noise)."""
    p99_ms: float = 500.0
    """Worst p99 latency of any model above this → degraded."""
    temperature_c: float = 85.0
    """Hottest sensor above this → degraded (Orin throttles from about 99 °C)."""
    memory_headroom: float = 0.10
    """Available / total memory below this fraction → degraded (CPU and GPU share it on Jetson)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Thresholds:
        """Defaults overridden by ``JETFLEET_HEALTH_*`` variables; a bad value names the fix."""
        values: dict[str, float | int] = {}
        for f in fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is None or raw == "":
                continue
            try:
                number = float(raw)
            except ValueError as exc:
                raise InvalidInput(
                    f"{ENV_PREFIX}{f.name.upper()}={raw!r} is not a number: set it to e.g. "
                    f"{getattr(cls, f.name)}"
                ) from exc
            if number < 0:
                raise InvalidInput(f"{ENV_PREFIX}{f.name.upper()} must be >= 0, got {raw}")
            values[f.name] = int(number) if f.name == "min_requests" else number
        return cls(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Vitals:
    """A device's telemetry over the recent window (None where no sample said)."""

    samples: int = 0
    requests: int = 0
    errors: int = 0
    p99_ms: float | None = None
    """Worst p99 of any model in the window."""
    temperature_c: float | None = None
    """Hottest sensor in the window."""
    memory_available_bytes: int | None = None
    """Least available memory in the window (falls back to total - used)."""
    memory_total_bytes: int | None = None
    last_sample_at: datetime | None = None

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.requests if self.requests else None

    @property
    def memory_headroom(self) -> float | None:
        if self.memory_available_bytes is None or not self.memory_total_bytes:
            return None
        return self.memory_available_bytes / self.memory_total_bytes


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
    thresholds: Thresholds,
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


def degraded_reasons(v: Vitals, t: Thresholds) -> list[str]:
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
