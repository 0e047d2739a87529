"""Per-model request counters and a latency window, sampled into ModelStats (pure, thread-safe).

Each sample covers the window since the previous one and then resets it, so telemetry carries
rates, not ever-growing totals; percentiles use the nearest-rank method.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shared.telemetry import ModelStats


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending, non-empty sequence (``pct`` in (0, 100])."""
    if not sorted_values:
        raise ValueError("percentile of an empty window")
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass
class Window:
    """One model's counters and successful latencies since the previous sample."""

    version: str | None = None
    requests: int = 0
    errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    def stats(
        self,
        name: str,
        latency_buckets: tuple[int, ...] = (),
        engine_key: str | None = None,
    ) -> ModelStats:
        """The window as the wire ``ModelStats`` of model ``name``."""
        lat = sorted(self.latencies_ms)
        return ModelStats(
            name=name,
            version=self.version,
            requests=self.requests,
            errors=self.errors,
            latency_p50_ms=percentile(lat, 50) if lat else None,
            latency_p95_ms=percentile(lat, 95) if lat else None,
            latency_p99_ms=percentile(lat, 99) if lat else None,
            latency_buckets=latency_buckets,
            engine_key=engine_key,
        )


class Metrics:
    """Counts requests, errors and latencies per model between samples."""

    def __init__(self, max_latencies: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._windows: dict[str, Window] = {}
        self._max_latencies = max_latencies

    def record(self, model: str, version: str | None, latency_s: float, ok: bool) -> None:
        """Count one request; only successful ones contribute a latency."""
        with self._lock:
            window = self._windows.setdefault(model, Window())
            window.version = version
            window.requests += 1
            if not ok:
                window.errors += 1
            elif len(window.latencies_ms) < self._max_latencies:
                window.latencies_ms.append(latency_s * 1000.0)

    def take(self, active: Mapping[str, str | None] | None = None) -> dict[str, Window]:
        """The window of every model seen or ``active`` (name → version) since the last call,
        by name; the windows start over."""
        with self._lock:
            windows, self._windows = self._windows, {}
        for name, version in (active or {}).items():
            windows.setdefault(name, Window(version=version))
        return {name: windows[name] for name in sorted(windows)}

    def sample(self, active: Mapping[str, str | None] | None = None) -> tuple[ModelStats, ...]:
        """Stats of every model seen or ``active`` (name → version) since the last sample."""
        return tuple(w.stats(name) for name, w in self.take(active).items())
