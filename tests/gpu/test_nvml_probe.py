"""The dGPU probes against a real NVIDIA GPU: NVML, CUDA Python and the driver's procfs agree."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agent.hardware.cuda_probe import probe_cuda
from agent.hardware.nvidia_driver import probe_driver
from agent.hardware.nvml_probe import probe_nvml
from agent.hardware.probe import choose_runtime, probe_hardware

pytestmark = pytest.mark.gpu


def test_nvml_probe_reports_gpu_zero(nvml: Any) -> None:
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    probe = probe_nvml()
    assert probe.source.available, probe.source.reason
    assert probe.gpu is not None
    assert probe.gpu.name == nvml.nvmlDeviceGetName(handle)
    assert probe.gpu.memory_total_bytes == nvml.nvmlDeviceGetMemoryInfo(handle).total
    assert probe.gpu.driver_version == nvml.nvmlSystemGetDriverVersion()
    major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
    assert probe.gpu.compute_capability == f"{major}.{minor}"
    assert re.fullmatch(r"\d+\.\d", probe.gpu.cuda_version or "")


def test_nvml_probe_leaves_nvml_usable_for_others(nvml: Any) -> None:
    probe_nvml()
    assert nvml.nvmlDeviceGetCount() >= 1


def test_procfs_driver_version_matches_nvml(nvml: Any) -> None:
    driver = probe_driver(Path("/"))
    if not driver.source.available:
        pytest.skip(f"no driver procfs here (a container?): {driver.source.reason}")
    assert driver.version == nvml.nvmlSystemGetDriverVersion()


def test_cuda_probe_agrees_with_nvml(nvml: Any) -> None:
    cuda = probe_cuda()
    if not cuda.source.available:
        pytest.skip(f"CUDA Python not usable here: {cuda.source.reason}")
    assert cuda.gpu is not None
    assert (cuda.gpu.sm_count or 0) > 0
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
    assert cuda.gpu.compute_capability == f"{major}.{minor}"
    assert cuda.integrated is False


def test_probe_hardware_on_a_dgpu_host(nvml: Any) -> None:
    hw = probe_hardware()
    assert hw.cuda_device
    assert hw.jetson is None
    assert hw.gpu is not None
    assert hw.gpu.name == nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(0))
    runtime, reason = choose_runtime(hw)
    if hw.tensorrt_version is None:
        assert runtime == "onnxruntime"
        assert "python3-libnvinfer" in reason
    else:
        assert runtime == "tensorrt"
