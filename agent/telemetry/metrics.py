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
class _Window:
    version: str | None = None
    requests: int = 0
    errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)


class Metrics:
    """Counts requests, errors and latencies per model between samples."""

    def __init__(self, max_latencies: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._windows: dict[str, _Window] = {}
        self._max_latencies = max_latencies

    def record(self, model: str, version: str | None, latency_s: float, ok: bool) -> None:
        """Count one request; only successful ones contribute a latency."""
        with self._lock:
            window = self._windows.setdefault(model, _Window())
            window.version = version
            window.requests += 1
            if not ok:
                window.errors += 1
            elif len(window.latencies_ms) < self._max_latencies:
                window.latencies_ms.append(latency_s * 1000.0)

    def sample(self, active: Mapping[str, str | None] | None = None) -> tuple[ModelStats, ...]:
        """Stats of every model seen or ``active`` (name → version) since the last sample."""
        with self._lock:
            windows, self._windows = self._windows, {}
        for name, version in (active or {}).items():
            windows.setdefault(name, _Window(version=version))
        stats = []
        for name in sorted(windows):
            w = windows[name]
            lat = sorted(w.latencies_ms)
            stats.append(
                ModelStats(
                    name=name,
                    version=w.version,
                    requests=w.requests,
                    errors=w.errors,
                    latency_p50_ms=percentile(lat, 50) if lat else None,
                    latency_p95_ms=percentile(lat, 95) if lat else None,
                    latency_p99_ms=percentile(lat, 99) if lat else None,
                )
            )
        return tuple(stats)
