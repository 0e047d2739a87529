"""A discrete GPU as NVML (``nvidia-ml-py``, imported as ``pynvml``) sees it.

The only module that imports ``pynvml``. NVML is for dGPU gateways: Jetsons before JetPack 6 have no
``libnvidia-ml`` and later ones answer little (docs/tensorrt.md#memory-on-a-jetson), so an absent
NVML on a Jetson is expected and its reason says so. ``nvmlShutdown`` always follows ``nvmlInit``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.hardware.cuda_probe import cuda_version_text
from shared.facts import FactSource, GpuFacts

INSTALL_HINT = "pip install nvidia-ml-py to report the dGPU"


@dataclass(frozen=True)
class NvmlProbe:
    """GPU 0's facts and the number of GPUs NVML sees."""

    gpu: GpuFacts | None
    source: FactSource
    device_count: int = 0


def probe_nvml() -> NvmlProbe:
    """Facts of GPU 0 through NVML; absent with the reason when NVML or a GPU is missing."""
    try:
        import pynvml
    except ImportError as exc:
        reason = f"nvidia-ml-py not importable ({exc}): {INSTALL_HINT}"
        return NvmlProbe(gpu=None, source=FactSource(available=False, reason=reason))
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        reason = f"NVML unavailable ({exc}); expected on a Jetson, where jtop and procfs answer"
        return NvmlProbe(gpu=None, source=FactSource(available=False, reason=reason))
    try:
        return _read_gpu(pynvml)
    except pynvml.NVMLError as exc:
        return NvmlProbe(gpu=None, source=FactSource(available=False, reason=f"NVML: {exc}"))
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _read_gpu(nvml: Any) -> NvmlProbe:
    count = int(nvml.nvmlDeviceGetCount())
    if count < 1:
        return NvmlProbe(gpu=None, source=FactSource(available=False, reason="NVML sees no GPU"))
    handle = nvml.nvmlDeviceGetHandleByIndex(0)

    def optional(function: Callable[..., Any], *args: Any) -> Any:
        try:
            return function(*args)
        except nvml.NVMLError_NotSupported:
            return None

    capability = optional(nvml.nvmlDeviceGetCudaComputeCapability, handle)
    cuda_driver = optional(nvml.nvmlSystemGetCudaDriverVersion)
    memory = optional(nvml.nvmlDeviceGetMemoryInfo, handle)
    gpu = GpuFacts(
        name=str(nvml.nvmlDeviceGetName(handle)),
        compute_capability=f"{capability[0]}.{capability[1]}" if capability else None,
        memory_total_bytes=int(memory.total) if memory is not None else None,
        cuda_version=cuda_version_text(int(cuda_driver)) if cuda_driver else None,
        driver_version=str(nvml.nvmlSystemGetDriverVersion()),
    )
    return NvmlProbe(gpu=gpu, source=FactSource(available=True), device_count=count)
