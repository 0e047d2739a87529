"""Telemetry's optional health fields: additive to jetfleet/telemetry/1, validated, round-trip."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from shared.codec import MessageError, decode, encode
from shared.telemetry import ModelStats, Telemetry

BASE = {
    "schema": "jetfleet/telemetry/1",
    "device_id": "gw-01",
    "sample_id": "gw-01:b:1",
    "ts": "2025-01-01T00:00:00Z",
    "interval_s": 10.0,
    "cpu_percent": 5.0,
    "memory_used_bytes": 1,
    "memory_total_bytes": 2,
}


def test_a_sample_from_an_older_agent_still_decodes_with_empty_health_fields() -> None:
    sample = decode(Telemetry, json.dumps(BASE).encode())
    assert sample.schema_ == "jetfleet/telemetry/1"
    assert sample.memory_available_bytes is None
    assert sample.temperatures_c == {}
    assert sample.sources_absent == {}
    assert sample.spool_dropped is None


def test_health_fields_and_histograms_round_trip() -> None:
    sample = Telemetry(
        device_id="gw-01",
        sample_id="gw-01:b:2",
        ts=datetime(2025, 1, 1, tzinfo=timezone.utc),
        interval_s=1.0,
        cpu_percent=1.0,
        memory_used_bytes=1,
        memory_total_bytes=2,
        models=(
            ModelStats(
                name="detector", requests=3, errors=0, latency_buckets=(1, 2, 0), engine_key="k"
            ),
        ),
        temperatures_c={"cpu": 41.5, "gpu": 40.0},
        temperature_max_c=41.5,
        power_rails_mw={"VDD_IN": 5200.0},
        latency_bounds_ms=(5.0, 50.0),
        lfb_blocks=3,
        jetson_clocks=False,
        sources_absent={"jtop": "jtop service not running"},
        spool_dropped=0,
    )
    assert decode(Telemetry, encode(sample)) == sample


def test_negative_bucket_counts_are_rejected_naming_the_field() -> None:
    payload = dict(
        BASE, models=[{"name": "m", "requests": 1, "errors": 0, "latency_buckets": [-1]}]
    )
    with pytest.raises(MessageError) as info:
        decode(Telemetry, json.dumps(payload).encode())
    assert "latency_buckets" in info.value.field
