"""The NVML collector against a stand-in ``pynvml`` shaped like nvidia-ml-py.

The real library needs an NVIDIA driver (tests/gpu/test_nvml_collector.py runs it there); this
stand-in keeps its conventions: ``NVMLError`` subclasses per code, init/shutdown reference
counting, handles by index, milliwatts and bytes.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from agent.telemetry.collectors.nvml_collector import NvmlCollector


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_DriverNotLoaded(NVMLError):
    pass


class NVMLError_GpuIsLost(NVMLError):
    pass


class Util:
    gpu = 87
    memory = 40


class Mem:
    total = 80 * 2**30
    used = 12 * 2**30
    free = total - used


def make_nvml(count: int = 2, power_supported: bool = True) -> Any:
    m = types.ModuleType("pynvml")
    state: dict[str, Any] = {"inits": 0, "fail_init": None, "lost": False}
    m.state = state  # type: ignore[attr-defined]
    m.NVMLError = NVMLError  # type: ignore[attr-defined]
    m.NVMLError_NotSupported = NVMLError_NotSupported  # type: ignore[attr-defined]
    m.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]
    m.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]

    def init() -> None:
        if state["fail_init"]:
            raise state["fail_init"]
        state["inits"] += 1

    def shutdown() -> None:
        state["inits"] -= 1

    def need_init() -> None:
        if state["inits"] < 1:
            raise NVMLError("Uninitialized")
        if state["lost"]:
            raise NVMLError_GpuIsLost("GPU is lost")

    def count_() -> int:
        need_init()
        return count

    def handle(i: int) -> int:
        need_init()
        return i

    def power(h: int) -> int:
        if not power_supported:
            raise NVMLError_NotSupported("Not Supported")
        return 310_000 + h

    m.nvmlInit = init  # type: ignore[attr-defined]
    m.nvmlShutdown = shutdown  # type: ignore[attr-defined]
    m.nvmlDeviceGetCount = count_  # type: ignore[attr-defined]
    m.nvmlDeviceGetHandleByIndex = handle  # type: ignore[attr-defined]
    m.nvmlDeviceGetName = lambda h: f"NVIDIA H200 #{h}"  # type: ignore[attr-defined]
    m.nvmlDeviceGetUUID = lambda h: f"GPU-{h:08d}"  # type: ignore[attr-defined]
    m.nvmlDeviceGetUtilizationRates = lambda h: Util()  # type: ignore[attr-defined]
    m.nvmlDeviceGetMemoryInfo = lambda h: Mem()  # type: ignore[attr-defined]
    m.nvmlDeviceGetTemperature = lambda h, sensor: 41 + h  # type: ignore[attr-defined]
    m.nvmlDeviceGetPowerUsage = power  # type: ignore[attr-defined]
    m.nvmlDeviceGetClockInfo = lambda h, clock: 1980  # type: ignore[attr-defined]
    return m


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> Any:
    module = make_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


def test_every_gpu_is_read(nvml: Any) -> None:
    collector = NvmlCollector()
    r = collector.collect()
    assert r.available, r.reason
    assert [g.name for g in r.gpus] == ["NVIDIA H200 #0", "NVIDIA H200 #1"]
    first = r.gpus[0]
    assert first.utilization_percent == 87
    assert (first.memory_used_bytes, first.memory_total_bytes) == (Mem.used, Mem.total)
    assert (first.temperature_c, first.power_draw_mw, first.sm_clock_mhz) == (41, 310_000, 1980)
    collector.close()
    assert nvml.state["inits"] == 0, "every nvmlInit is paired with one nvmlShutdown"


def test_nvml_is_initialised_once_for_many_samples(nvml: Any) -> None:
    collector = NvmlCollector()
    collector.collect()
    collector.collect()
    assert nvml.state["inits"] == 1
    collector.close()
    collector.close()
    assert nvml.state["inits"] == 0


def test_unsupported_queries_are_none_not_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", make_nvml(power_supported=False))
    r = NvmlCollector().collect()
    assert r.available
    assert all(g.power_draw_mw is None for g in r.gpus)
    assert all(g.temperature_c is not None for g in r.gpus)


def test_no_driver_is_reported_with_nvmls_words(nvml: Any) -> None:
    nvml.state["fail_init"] = NVMLError_DriverNotLoaded("Driver Not Loaded")
    r = NvmlCollector().collect()
    assert not r.available
    assert r.reason is not None
    assert "Driver Not Loaded" in r.reason


def test_a_lost_gpu_drops_the_session_and_the_next_sample_starts_over(nvml: Any) -> None:
    collector = NvmlCollector()
    assert collector.collect().available
    nvml.state["lost"] = True
    lost = collector.collect()
    assert not lost.available
    assert lost.reason is not None
    assert "GPU is lost" in lost.reason
    assert nvml.state["inits"] == 0
    nvml.state["lost"] = False
    assert collector.collect().available
    collector.close()


def test_without_nvidia_ml_py_the_reason_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    r = NvmlCollector().collect()
    assert not r.available
    assert r.reason is not None
    assert "nvidia-ml-py" in r.reason
