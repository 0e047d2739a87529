"""What devices sent, as the database hands it out: samples, events, a window's vitals."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class TelemetryRecord:
    sample_id: str
    ts: datetime
    cpu_percent: float
    memory_used_bytes: int
    memory_total_bytes: int
    models: list[dict[str, Any]]


@dataclass(frozen=True)
class EventEntry:
    event_id: str
    ts: datetime
    kind: str
    slot: str | None
    message: str


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
