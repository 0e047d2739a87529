"""Inference health: per-model counters and percentiles from :mod:`agent.telemetry.metrics`, plus a
latency
histogram, queue depth, the active engine key per model and engine swaps (pure: no I/O).

Histogram buckets are per window and not cumulative: ``latency_buckets[i]`` counts successful
requests with ``bounds_ms[i-1] < latency <= bounds_ms[i]``; the last bucket counts those above the
last bound. Windows add up by summing buckets, which is what rollups need.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from agent.telemetry.metrics import Metrics, Window
from shared.telemetry import ModelStats

DEFAULT_BOUNDS_MS: tuple[float, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


def bucket_counts(latencies_ms: Iterable[float], bounds_ms: Sequence[float]) -> tuple[int, ...]:
    """Count latencies into ``len(bounds_ms) + 1`` buckets (upper bounds inclusive)."""
    counts = [0] * (len(bounds_ms) + 1)
    for latency in latencies_ms:
        counts[bisect.bisect_left(bounds_ms, latency)] += 1
    return tuple(counts)


class LatencyHistogram:
    """Per-model latency buckets since the previous :meth:`take` (thread-safe)."""

    def __init__(self, bounds_ms: Sequence[float] = DEFAULT_BOUNDS_MS) -> None:
        if list(bounds_ms) != sorted(set(bounds_ms)) or not bounds_ms:
            raise ValueError("histogram bounds must be distinct and ascending, e.g. (1, 5, 10)")
        self.bounds_ms = tuple(float(b) for b in bounds_ms)
        self._lock = threading.Lock()
        self._counts: dict[str, list[int]] = {}

    def observe(self, model: str, latency_s: float) -> None:
        """Count one successful request's latency."""
        index = bisect.bisect_left(self.bounds_ms, latency_s * 1000.0)
        with self._lock:
            counts = self._counts.setdefault(model, [0] * (len(self.bounds_ms) + 1))
            counts[index] += 1

    def take(self) -> dict[str, tuple[int, ...]]:
        """The buckets of every model since the previous call; the window starts over."""
        with self._lock:
            counts, self._counts = self._counts, {}
        return {model: tuple(values) for model, values in counts.items()}


class HistogramMetrics(Metrics):
    """:class:`~agent.telemetry.metrics.Metrics` that also feeds a :class:`LatencyHistogram`."""

    def __init__(self, histogram: LatencyHistogram | None = None, max_latencies: int = 100_000):
        super().__init__(max_latencies=max_latencies)
        self.histogram = histogram or LatencyHistogram()

    def record(self, model: str, version: str | None, latency_s: float, ok: bool) -> None:
        """Count one request; successful ones also land in the histogram."""
        super().record(model, version, latency_s, ok)
        if ok:
            self.histogram.observe(model, latency_s)


@dataclass(frozen=True)
class InferenceReadings:
    """The serving side of one sample; ``swaps`` counts engine swaps during the window."""

    available: bool
    reason: str | None = None
    models: tuple[ModelStats, ...] = ()
    bounds_ms: tuple[float, ...] = DEFAULT_BOUNDS_MS
    queue_depth: int | None = None
    swaps: int = 0


def inference_readings(
    windows: Mapping[str, Window],
    buckets: Mapping[str, tuple[int, ...]],
    bounds_ms: tuple[float, ...],
    engine_keys: Mapping[str, str],
    queue_depth: int | None,
    swaps: int,
) -> InferenceReadings:
    """Join the metrics window, the histogram window and the serving state per model."""
    empty = (0,) * (len(bounds_ms) + 1)
    models = tuple(
        window.stats(name, buckets.get(name, empty), engine_keys.get(name))
        for name, window in windows.items()
    )
    return InferenceReadings(
        available=True, models=models, bounds_ms=bounds_ms, queue_depth=queue_depth, swaps=swaps
    )


class InferenceCollector:
    """Samples the serving side; each ``collect`` closes one window of counters.

    ``active`` names the served models (name → version) so idle ones still appear;
    ``engine_keys`` maps a model to its active engine key; ``queue_depth`` answers the requests
    waiting now (``None`` if unknown); ``swaps_total`` is a running count of engine swaps, of
    which each sample reports the increase.
    """

    def __init__(
        self,
        metrics: HistogramMetrics,
        active: Callable[[], Mapping[str, str | None]] = dict,
        engine_keys: Callable[[], Mapping[str, str]] = dict,
        queue_depth: Callable[[], int | None] = lambda: None,
        swaps_total: Callable[[], int] = lambda: 0,
    ) -> None:
        self._metrics = metrics
        self._active = active
        self._engine_keys = engine_keys
        self._queue_depth = queue_depth
        self._swaps_total = swaps_total
        self._last_swaps = swaps_total()

    def collect(self) -> InferenceReadings:
        """The window since the previous call."""
        windows = self._metrics.take(self._active())
        buckets = self._metrics.histogram.take()
        swaps_now = self._swaps_total()
        swaps = max(0, swaps_now - self._last_swaps)
        self._last_swaps = swaps_now
        return inference_readings(
            windows,
            buckets,
            self._metrics.histogram.bounds_ms,
            self._engine_keys(),
            self._queue_depth(),
            swaps,
        )

    def close(self) -> None:
        """Nothing to release; here so every collector closes the same way."""
