"""Telemetry a simulated Jetson agent publishes in the health tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from shared.messages import Event
from shared.telemetry import ModelStats, Telemetry


def sample(
    device_id: str,
    n: int,
    *,
    at: datetime | None = None,
    cpu: float = 20.0,
    temperature: float = 50.0,
    requests: int = 100,
    errors: int = 0,
    p99: float = 12.0,
    available: int = 4 << 30,
) -> Telemetry:
    """The ``n``-th 1 s sample of a device with one model (p50 = p99 / 2)."""
    ts = at or datetime.now(timezone.utc)
    return Telemetry(
        device_id=device_id,
        sample_id=f"{device_id}-{n}",
        ts=ts,
        interval_s=1.0,
        cpu_percent=cpu,
        memory_used_bytes=(8 << 30) - available,
        memory_total_bytes=8 << 30,
        memory_available_bytes=available,
        gpu_load_percent=cpu * 2,
        temperature_max_c=temperature,
        temperatures_c={"cpu": temperature - 1, "gpu": temperature},
        power_mw=7500.0,
        power_rails_mw={"VDD_IN": 7500.0},
        power_mode="15W",
        queue_depth=1,
        models=(
            ModelStats(
                name="detector",
                version="1.0.0",
                requests=requests,
                errors=errors,
                latency_p50_ms=p99 / 2,
                latency_p99_ms=p99,
                engine_key="k" * 16,
            ),
        ),
    )


def event(device_id: str, n: int) -> Event:
    return Event(
        device_id=device_id,
        event_id=f"{device_id}-e{n}",
        ts=datetime.now(timezone.utc),
        kind="swap",
        slot="detector",
        message=f"swap {n}",
    )


def minute_start(ts: datetime) -> datetime:
    return ts.replace(second=0, microsecond=0) + timedelta(0)
