"""Prometheus ``/metrics`` of the agent, in the text exposition format 0.0.4, written by hand.

Cumulative (Prometheus computes rates), unlike the telemetry windows of
:mod:`agent.telemetry.metrics`:
requests and errors per model, a latency histogram per model, the queue depth, the active
engine per model (an info-style gauge), swaps per model, and memory before/after the last swap.
No client library: the format is a few lines, and the agent stays dependency-light.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Mapping
from typing import Protocol

from agent.serving.core import ModelRegistry, ServedModel

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BOUNDS_S: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)  # fmt: skip


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: str) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + inner + "}" if inner else ""


def _num(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))


class _Snapshot(Protocol):
    def as_dict(self) -> Mapping[str, int | None]: ...


class _SwapRecord(Protocol):
    @property
    def before(self) -> _Snapshot: ...
    @property
    def after(self) -> _Snapshot: ...


class SwapCounts(Protocol):
    """What ``/metrics`` reads of the swaps so far (:class:`agent.swap.hotswap.SwapStats`).

    A protocol, so serving (below swap in the layers) does not import the swap package.
    """

    @property
    def total(self) -> Mapping[str, int]: ...
    @property
    def failed(self) -> Mapping[str, int]: ...
    @property
    def last(self) -> Mapping[str, _SwapRecord]: ...


class _Model:
    def __init__(self) -> None:
        self.requests = 0
        self.errors = 0
        self.buckets = [0] * (len(BOUNDS_S) + 1)
        self.sum_s = 0.0


class PromMetrics:
    """Counts requests as they happen; :meth:`render` answers ``GET /metrics``."""

    def __init__(self, registry: ModelRegistry, swaps: SwapCounts | None = None) -> None:
        self._registry = registry
        self._swaps = swaps
        self._lock = threading.Lock()
        self._models: dict[str, _Model] = {}

    def record(self, model: str, latency_s: float, ok: bool) -> None:
        with self._lock:
            m = self._models.setdefault(model, _Model())
            m.requests += 1
            if not ok:
                m.errors += 1
                return
            m.buckets[bisect.bisect_left(BOUNDS_S, latency_s)] += 1
            m.sum_s += latency_s

    def render(self) -> str:
        lines: list[str] = []

        def family(name: str, kind: str, help_text: str, samples: Iterable[str]) -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(samples)

        with self._lock:
            models = {
                n: (m.requests, m.errors, list(m.buckets), m.sum_s) for n, m in self._models.items()
            }
        family(
            "jetfleet_requests_total",
            "counter",
            "Inference requests received, per model.",
            (
                f"jetfleet_requests_total{_labels(model=n)} {v[0]}"
                for n, v in sorted(models.items())
            ),
        )
        family(
            "jetfleet_request_errors_total",
            "counter",
            "Inference requests that failed (4xx/5xx), per model.",
            (
                f"jetfleet_request_errors_total{_labels(model=n)} {v[1]}"
                for n, v in sorted(models.items())
            ),
        )
        hist: list[str] = []
        for name, (_, _, buckets, total_s) in sorted(models.items()):
            running = 0
            for bound, count in zip((*BOUNDS_S, float("inf")), buckets, strict=True):
                running += count
                le = "+Inf" if bound == float("inf") else _num(bound)
                hist.append(
                    f"jetfleet_request_latency_seconds_bucket{_labels(model=name, le=le)} {running}"
                )
            hist.append(f"jetfleet_request_latency_seconds_sum{_labels(model=name)} {total_s!r}")
            hist.append(f"jetfleet_request_latency_seconds_count{_labels(model=name)} {running}")
        family(
            "jetfleet_request_latency_seconds",
            "histogram",
            "Latency of successful inference requests, per model.",
            hist,
        )
        family(
            "jetfleet_queue_depth",
            "gauge",
            "Requests in flight or held during a cold swap, over every model.",
            [f"jetfleet_queue_depth {self._registry.inflight()}"],
        )
        active = [
            "jetfleet_active_engine"
            + _labels(
                model=e.name,
                version=e.version,
                engine_key=e.engine_key or "",
                runtime=e.runtime or "",
                fallback="true" if e.fallback else "false",
            )
            + " 1"
            for e in sorted(self._registry_active(), key=lambda e: e.name)
        ]
        family(
            "jetfleet_active_engine",
            "gauge",
            "The engine serving each model (value 1); fallback=true: ONNX Runtime serves it "
            "because TensorRT could not.",
            active,
        )
        swaps = self._swaps
        if swaps is not None:
            family(
                "jetfleet_swaps_total",
                "counter",
                "Engine swaps completed, per model.",
                (
                    f"jetfleet_swaps_total{_labels(model=n)} {c}"
                    for n, c in sorted(swaps.total.items())
                ),
            )
            family(
                "jetfleet_swap_failures_total",
                "counter",
                "Swaps refused or failed (the old engine kept serving), per model.",
                (
                    f"jetfleet_swap_failures_total{_labels(model=n)} {c}"
                    for n, c in sorted(swaps.failed.items())
                ),
            )
            mem: list[str] = []
            for name, rec in sorted(swaps.last.items()):
                for when, snap in (("before", rec.before), ("after", rec.after)):
                    for key, value in snap.as_dict().items():
                        if value is not None:
                            kind = key.removesuffix("_bytes")
                            labels = _labels(model=name, when=when, kind=kind)
                            mem.append(f"jetfleet_swap_memory_bytes{labels} {value}")
            family(
                "jetfleet_swap_memory_bytes",
                "gauge",
                "Memory before and after the last swap of each model.",
                mem,
            )
        return "\n".join(lines) + "\n"

    def _registry_active(self) -> list[ServedModel]:
        return [e for e in self._registry.entries() if self._registry.get(e.name) is e]
