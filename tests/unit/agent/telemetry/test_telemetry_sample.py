"""From one health sample to the wire Telemetry: host load, models with histograms, absences."""

from __future__ import annotations

from datetime import datetime, timezone

from agent.telemetry.collectors.health import HealthReadings
from agent.telemetry.collectors.host import HostReadings
from agent.telemetry.collectors.inference import InferenceReadings
from agent.telemetry.collectors.nvml_collector import NvmlReadings
from agent.telemetry.loop import telemetry_sample
from shared.telemetry import ModelStats, Telemetry

TS = datetime(2025, 1, 1, tzinfo=timezone.utc)
HOST = HostReadings(
    available=True,
    cpu_percent=12.5,
    memory_used_bytes=3 << 30,
    memory_total_bytes=8 << 30,
    memory_available_bytes=5 << 30,
    disk_free_bytes=20 << 30,
    net_sent_bytes=100,
    net_recv_bytes=200,
)
DETECTOR = ModelStats(
    name="detector",
    version="2",
    requests=4,
    errors=1,
    latency_p50_ms=3.0,
    latency_p95_ms=9.0,
    latency_p99_ms=9.0,
    latency_buckets=(0, 2, 1),
    engine_key="abc",
)


def test_host_models_histogram_and_spool_counter_reach_the_sample() -> None:
    readings = HealthReadings(
        host=HOST,
        nvml=NvmlReadings(available=False, reason="nvidia-ml-py not importable"),
        inference=InferenceReadings(
            available=True, models=(DETECTOR,), bounds_ms=(1.0, 5.0), queue_depth=2, swaps=1
        ),
    )
    sample = telemetry_sample("gw-01", "gw-01:b:7", TS, 10.0, readings, spool_dropped=4)
    assert (sample.cpu_percent, sample.memory_total_bytes) == (12.5, 8 << 30)
    assert sample.memory_available_bytes == 5 << 30
    assert sample.disk_free_bytes == 20 << 30
    assert (sample.net_sent_bytes, sample.net_recv_bytes) == (100, 200)
    (model,) = sample.models
    assert (model.name, model.requests, model.errors) == ("detector", 4, 1)
    assert model.latency_buckets == (0, 2, 1)
    assert model.engine_key == "abc"
    assert sample.latency_bounds_ms == (1.0, 5.0)
    assert (sample.queue_depth, sample.swaps, sample.spool_dropped) == (2, 1, 4)
    assert sample.sources_absent == {"nvml": "nvidia-ml-py not importable"}


def test_a_failed_host_collector_reports_zero_load_and_says_why() -> None:
    readings = HealthReadings(host=HostReadings(available=False, reason="psutil failed: boom"))
    sample = telemetry_sample("gw-01", "gw-01:b:8", TS, 0.0, readings, spool_dropped=None)
    assert (sample.cpu_percent, sample.memory_used_bytes, sample.memory_total_bytes) == (0, 0, 0)
    assert sample.interval_s > 0
    assert sample.models == ()
    assert sample.sources_absent == {"host": "psutil failed: boom"}


def test_every_headline_figure_of_the_collectors_is_a_telemetry_field() -> None:
    fields = HealthReadings(host=HOST).telemetry_fields()
    assert set(fields) <= set(Telemetry.model_fields)
