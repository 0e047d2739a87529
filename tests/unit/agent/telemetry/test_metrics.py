"""Metrics: per-model windows sampled into ModelStats."""

from __future__ import annotations

import pytest

from agent.telemetry.metrics import Metrics, percentile


def test_percentiles_use_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 95) == 95.0
    assert percentile(values, 99) == 99.0
    assert percentile([7.0], 99) == 7.0


def test_percentile_of_empty_window_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        percentile([], 50)


def test_sample_reports_counts_and_latency_then_resets_the_window() -> None:
    m = Metrics()
    for ms in range(1, 21):
        m.record("cls", "1", ms / 1000, ok=True)
    m.record("cls", "1", 0.5, ok=False)
    (stats,) = m.sample()
    assert (stats.name, stats.version, stats.requests, stats.errors) == ("cls", "1", 21, 1)
    assert stats.latency_p50_ms == pytest.approx(10.0)
    assert stats.latency_p95_ms == pytest.approx(19.0)
    assert stats.latency_p99_ms == pytest.approx(20.0)
    (after,) = m.sample({"cls": "1"})
    assert (after.requests, after.errors, after.latency_p50_ms) == (0, 0, None)


def test_active_models_without_traffic_appear_with_zero_counts() -> None:
    m = Metrics()
    m.record("b", "2", 0.001, ok=True)
    stats = m.sample({"a": "1", "b": "2"})
    assert [(s.name, s.version, s.requests) for s in stats] == [("a", "1", 0), ("b", "2", 1)]
    assert stats[0].latency_p99_ms is None


def test_only_failed_requests_give_no_latency() -> None:
    m = Metrics()
    m.record("cls", "1", 0.2, ok=False)
    (stats,) = m.sample()
    assert (stats.requests, stats.errors, stats.latency_p50_ms) == (1, 1, None)
