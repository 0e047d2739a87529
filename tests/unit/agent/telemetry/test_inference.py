"""Inference readings: metrics window, latency histogram, engine keys, queue depth, swaps."""

from __future__ import annotations

import pytest

from agent.telemetry.collectors.inference import (
    HistogramMetrics,
    InferenceCollector,
    LatencyHistogram,
    bucket_counts,
)


def test_buckets_have_inclusive_upper_bounds_and_an_overflow_bucket() -> None:
    assert bucket_counts([0.5, 1.0, 1.5, 10.0, 99.0], (1, 10)) == (2, 2, 1)


def test_histogram_rejects_unsorted_bounds() -> None:
    with pytest.raises(ValueError, match="ascending"):
        LatencyHistogram((10, 5))


def test_a_window_joins_counts_histogram_engine_and_swaps() -> None:
    metrics = HistogramMetrics(LatencyHistogram((5, 50)))
    swaps = [3]
    collector = InferenceCollector(
        metrics,
        active=lambda: {"detector": "1.0.0", "idle": "2.0.0"},
        engine_keys=lambda: {"detector": "trt10.3-sm87-fp16-abc"},
        queue_depth=lambda: 4,
        swaps_total=lambda: swaps[0],
    )
    metrics.record("detector", "1.0.0", 0.002, ok=True)
    metrics.record("detector", "1.0.0", 0.020, ok=True)
    metrics.record("detector", "1.0.0", 0.400, ok=True)
    metrics.record("detector", "1.0.0", 0.001, ok=False)
    swaps[0] = 4

    r = collector.collect()
    by_name = {m.name: m for m in r.models}
    detector = by_name["detector"]
    assert (detector.requests, detector.errors) == (4, 1)
    assert detector.latency_buckets == (1, 1, 1), "failed requests carry no latency"
    assert detector.engine_key == "trt10.3-sm87-fp16-abc"
    assert detector.latency_p99_ms == pytest.approx(400.0)
    assert by_name["idle"].requests == 0
    assert by_name["idle"].latency_buckets == (0, 0, 0)
    assert r.bounds_ms == (5.0, 50.0)
    assert (r.queue_depth, r.swaps) == (4, 1)

    again = collector.collect()
    assert {m.name: m.requests for m in again.models} == {"detector": 0, "idle": 0}
    assert again.models[0].latency_buckets == (0, 0, 0)
    assert again.swaps == 0
