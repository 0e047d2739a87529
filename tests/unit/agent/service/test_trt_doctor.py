"""The doctor's TensorRT and CUDA rows per JetPack line: interpreter, Python, TensorRT and CUDA
versions, whether the release is supported, and the exact package to install when not."""

from __future__ import annotations

import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from agent.hardware.probe import HardwareFacts
from agent.hardware.tensorrt_probe import probe_tensorrt
from agent.hardware.trt_python import TrtPython
from agent.service.doctor import CheckResult, Observations, run_checks
from shared.facts import FactSource, GpuFacts, JetsonFacts

NOBODY = TrtPython(
    interpreter=None,
    python_version="3.8.10",
    tensorrt_version=None,
    cuda_runtime_version="11.4",
    cuda_driver_version="11.4",
    dla_cores=None,
    reason="no interpreter imports a supported TensorRT; /usr/bin/python3: Python 3.8.10: "
    "cannot import tensorrt (ModuleNotFoundError: No module named 'tensorrt')",
    candidate="/usr/bin/python3",
    cuda_devices=1,
)


def observations(hw: HardwareFacts, runtime: str = "auto") -> Observations:
    return Observations(
        broker_url="mqtt://broker:1883",
        broker_error=None,
        controller_url=None,
        controller=None,
        local_time=datetime(2025, 6, 1, tzinfo=timezone.utc),
        credentials=[],
        credentials_error=None,
        hardware=hw,
        runtime_setting=runtime,
        state_dir=Path("/var/lib/jetfleet/agent"),
        free_bytes=50 * 2**30,
        engine_cache_bytes=2**30,
    )


def row(hw: HardwareFacts, name: str, runtime: str = "auto") -> CheckResult:
    return {r.name: r for r in run_checks(observations(hw, runtime))}[name]


def jetson_without_tensorrt(jetpack: str) -> HardwareFacts:
    trt = probe_tensorrt(find=lambda _: NOBODY)
    return HardwareFacts(
        jetson=JetsonFacts(module="Jetson", jetpack=jetpack),
        gpu=GpuFacts(compute_capability="8.7"),
        tensorrt_version=None,
        sources={"tensorrt": trt.source, "cudart": trt.cudart},
        cuda_device=True,
        tensorrt_python=NOBODY,
    )


@pytest.mark.parametrize(
    ("jetpack", "expected"),
    [
        ("5.1", "on JetPack 5.1: TensorRT 8.5.2 for Python 3.8, /usr/bin/python3.8"),
        ("5.1.2", "on JetPack 5.1: TensorRT 8.5.2 for Python 3.8, /usr/bin/python3.8"),
        ("6.0", "on JetPack 6.0: TensorRT 8.6.2 for Python 3.10, /usr/bin/python3.10"),
        ("6.1", "on JetPack 6.1/6.2: TensorRT 10.3 for Python 3.10, /usr/bin/python3.10"),
        ("6.2.1", "on JetPack 6.1/6.2: TensorRT 10.3 for Python 3.10, /usr/bin/python3.10"),
        ("7.0", "on JetPack 7: TensorRT 10.13 for Python 3.12, /usr/bin/python3.12"),
    ],
)
def test_a_jetson_without_tensorrt_gets_its_lines_package(jetpack: str, expected: str) -> None:
    check = row(jetson_without_tensorrt(jetpack), "tensorrt")
    assert check.status == "warn"
    assert "No module named 'tensorrt'" in check.detail
    assert check.fix == (
        f"sudo apt install python3-libnvinfer ({expected}); or set runtime = onnxruntime"
    )
    forced = row(jetson_without_tensorrt(jetpack), "tensorrt", runtime="tensorrt")
    assert (forced.status, forced.fix) == ("fail", check.fix)


def test_a_jetpack_no_row_covers_says_so() -> None:
    check = row(jetson_without_tensorrt("4.6.4"), "tensorrt")
    assert check.fix.startswith("JetPack 4.6.4 is not in Jetfleet's table")


@pytest.mark.parametrize(
    ("cuda", "wheel"),
    [
        ("11.8", "tensorrt-cu11==10.13.0.35"),
        ("12.6", "tensorrt-cu12==11.1.0.106"),
        ("13.0", "tensorrt-cu13==11.1.0.106"),
        (None, "tensorrt-cu12==11.1.0.106"),
    ],
)
def test_x86_gets_the_wheel_for_its_cuda_major_into_the_agents_python(
    cuda: str | None, wheel: str
) -> None:
    found = replace(NOBODY, cuda_driver_version=cuda)
    hw = HardwareFacts(
        jetson=None,
        gpu=GpuFacts(name="NVIDIA RTX A2000", cuda_version=cuda),
        tensorrt_version=None,
        sources={},
        cuda_device=True,
        tensorrt_python=found,
    )
    check = row(hw, "tensorrt")
    assert check.fix.startswith(f"{sys.executable} -m pip install {wheel}, or the distribution's")


def test_an_unsupported_release_is_named_with_its_interpreter_and_the_supported_range() -> None:
    old = replace(
        NOBODY,
        tensorrt_version="8.4.1.5",
        candidate="/usr/bin/python3.8",
        reason="/usr/bin/python3.8: Python 3.8.10: TensorRT 8.4.1 is not supported",
    )
    hw = replace(jetson_without_tensorrt("5.0.2"), tensorrt_python=old)
    check = row(hw, "tensorrt", runtime="tensorrt")
    assert check.status == "fail"
    assert check.detail == (
        "TensorRT 8.4.1.5 under /usr/bin/python3.8 (Python 3.8.10) is not supported "
        "(this agent runs 8.5 to 11.1)"
    )
    assert "python3-libnvinfer" in check.fix


def test_a_usable_tensorrt_shows_interpreter_python_versions_and_support() -> None:
    found = TrtPython(
        interpreter="/usr/bin/python3.8",
        python_version="3.8.10",
        tensorrt_version="8.5.2.2",
        cuda_runtime_version="11.4",
        cuda_driver_version="11.4",
        dla_cores=2,
        reason=None,
        runtime_created=True,
        candidate="/usr/bin/python3.8",
        cuda_devices=1,
    )
    trt = probe_tensorrt(find=lambda _: found)
    hw = HardwareFacts(
        jetson=JetsonFacts(module="Jetson AGX Xavier", jetpack="5.1.2"),
        gpu=GpuFacts(name="Xavier"),
        tensorrt_version=trt.version,
        sources={"tensorrt": trt.source, "cudart": trt.cudart},
        cuda_device=True,
        tensorrt_python=found,
    )
    tensorrt = row(hw, "tensorrt")
    assert (tensorrt.status, tensorrt.detail) == (
        "ok",
        "TensorRT 8.5.2.2 under /usr/bin/python3.8 (Python 3.8.10), supported (8.5 to 11.1)",
    )
    cuda = row(hw, "cuda")
    assert (cuda.status, cuda.detail) == (
        "ok",
        "Xavier answers (CUDA runtime 11.4, driver 11.4 under /usr/bin/python3.8)",
    )
    assert trt.dla_cores == 2


def test_a_tensorrt_runtime_alone_does_not_prove_the_hosts_cuda_layer() -> None:
    """The old probe counted a created TensorRT runtime as a CUDA device; the host needs
    libcudart too, so without it the CUDA source is absent with libcudart's reason."""
    found = TrtPython(
        interpreter="/usr/bin/python3.10",
        python_version="3.10.12",
        tensorrt_version="10.3.0",
        cuda_runtime_version=None,
        cuda_driver_version=None,
        dla_cores=0,
        reason=None,
        runtime_created=True,
        candidate="/usr/bin/python3.10",
        cuda_devices=None,
        cuda_error="CUDA unavailable: libcudart not found",
    )
    trt = probe_tensorrt(find=lambda _: found)
    assert trt.source == FactSource(available=True)
    assert trt.cudart == FactSource(
        available=False, reason="under /usr/bin/python3.10: CUDA unavailable: libcudart not found"
    )
