"""Wire messages a test agent publishes."""

from __future__ import annotations

from datetime import datetime, timezone

from shared.facts import DeviceFacts
from shared.messages import ReportedState
from shared.telemetry import Telemetry


def now() -> datetime:
    return datetime.now(timezone.utc)


def reported(device_id: str, labels: dict[str, str], generation: int = -1) -> ReportedState:
    return ReportedState(
        device_id=device_id,
        observed_generation=generation,
        reported_at=now(),
        labels=labels,
        facts=DeviceFacts(hostname=device_id, os="Linux", arch="x86_64", simulated=True),
        serve_url="http://127.0.0.1:9000",
        agent_version="test",
    )


def telemetry(device_id: str, sample_id: str, cpu: float = 12.5) -> Telemetry:
    return Telemetry(
        device_id=device_id,
        sample_id=sample_id,
        ts=now(),
        interval_s=5.0,
        cpu_percent=cpu,
        memory_used_bytes=1_000,
        memory_total_bytes=8_000,
    )
