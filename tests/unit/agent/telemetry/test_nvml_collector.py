"""NVML readings into the telemetry sample: the pure part, on plain values.

The collector itself talks to the real NVML, on a GPU host only (tests/gpu/test_nvml_collector.py:
every GPU against NVML's own answers, nvmlInit/nvmlShutdown paired across samples). Here only
what needs no NVML: readings as the collector builds them, turned into the sample's figures, and
the reason given where nvidia-ml-py is not installed.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from agent.telemetry.collectors.health import HealthReadings
from agent.telemetry.collectors.nvml_collector import GpuReading, NvmlCollector, NvmlReadings

GIB = 2**30


def h100(index: int, **values: Any) -> GpuReading:
    """A reading shaped as the collector makes it (percent, bytes, °C, mW, MHz)."""
    reading: dict[str, Any] = {
        "index": index,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": f"GPU-{index:08d}-0000-0000-0000-000000000000",
        "utilization_percent": 87.0,
        "memory_used_bytes": 12 * GIB,
        "memory_total_bytes": 80 * GIB,
        "temperature_c": 41.0,
        "power_draw_mw": 310_000,
        "sm_clock_mhz": 1980,
    }
    reading.update(values)
    return GpuReading(**reading)


def sample(readings: NvmlReadings) -> dict[str, Any]:
    return HealthReadings(nvml=readings).telemetry_fields()


def test_every_gpu_counts_in_the_sample() -> None:
    fields = sample(
        NvmlReadings(
            available=True,
            gpus=(
                h100(0),
                h100(1, utilization_percent=13.0, temperature_c=44.0, power_draw_mw=120_500),
            ),
        )
    )
    assert fields["gpu_load_percent"] == pytest.approx((87.0 + 13.0) / 2)
    assert fields["gpu_memory_used_bytes"] == 24 * GIB
    assert fields["gpu_memory_total_bytes"] == 160 * GIB
    assert fields["temperatures_c"] == {"gpu0": 41.0, "gpu1": 44.0}
    assert fields["temperature_max_c"] == 44.0
    assert fields["power_mw"] == 430_500.0
    assert fields["sources_absent"] == {}


def test_a_query_a_gpu_does_not_support_is_left_out_not_counted_as_zero() -> None:
    fields = sample(
        NvmlReadings(
            available=True,
            gpus=(
                h100(0, utilization_percent=None, power_draw_mw=None, temperature_c=None),
                h100(1, utilization_percent=40.0, power_draw_mw=200_000),
            ),
        )
    )
    assert fields["gpu_load_percent"] == pytest.approx(40.0)
    assert fields["power_mw"] == 200_000.0
    assert fields["temperatures_c"] == {"gpu1": 41.0}


def test_a_gpu_answering_nothing_gives_no_figures() -> None:
    silent = h100(
        0,
        utilization_percent=None,
        memory_used_bytes=None,
        memory_total_bytes=None,
        temperature_c=None,
        power_draw_mw=None,
        sm_clock_mhz=None,
    )
    fields = sample(NvmlReadings(available=True, gpus=(silent,)))
    for name in ("gpu_load_percent", "gpu_memory_used_bytes", "gpu_memory_total_bytes"):
        assert fields[name] is None, name
    assert fields["power_mw"] is None
    assert fields["temperatures_c"] == {}
    assert fields["temperature_max_c"] is None


def test_nvml_absent_gives_no_gpu_figures_and_says_why() -> None:
    reason = "NVML unavailable (Driver Not Loaded); expected on a Jetson"
    fields = sample(NvmlReadings(available=False, reason=reason))
    assert fields["gpu_load_percent"] is None
    assert fields["gpu_memory_total_bytes"] is None
    assert fields["power_mw"] is None
    assert fields["sources_absent"] == {"nvml": reason}


def test_without_nvidia_ml_py_the_reason_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    r = NvmlCollector().collect()
    assert not r.available
    assert r.reason is not None
    assert "nvidia-ml-py" in r.reason
