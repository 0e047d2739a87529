"""dGPU health through NVML (``nvidia-ml-py``, imported as ``pynvml``), one reading per GPU.

NVML is initialised on the first ``collect`` and shut down by ``close`` (every ``nvmlInit`` is
paired with one ``nvmlShutdown``; NVML counts them). A query a GPU does not support answers ``None``
instead of failing the sample (docs/tensorrt.md#nvml-on-dgpu-gateways). Any other NVML error drops
the session, reports the reason, and the next ``collect`` initialises again (a driver reload
invalidates old handles). On a Jetson NVML is missing or answers little: use the Jetson collectors
there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

INSTALL_HINT = "pip install nvidia-ml-py to report the dGPU"

T = TypeVar("T")


@dataclass(frozen=True)
class GpuReading:
    """One GPU's load; ``None`` where NVML does not support the query on this GPU."""

    index: int
    name: str
    uuid: str | None
    utilization_percent: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    temperature_c: float | None
    power_draw_mw: int | None
    sm_clock_mhz: int | None


@dataclass(frozen=True)
class NvmlReadings:
    """Every GPU NVML sees."""

    available: bool
    reason: str | None = None
    gpus: tuple[GpuReading, ...] = ()


class NvmlCollector:
    """Samples every GPU through NVML; the only collector that imports ``pynvml``."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._missing: NvmlReadings | None = None

    def collect(self) -> NvmlReadings:
        """A reading per GPU, or absent with the reason NVML gave."""
        if self._missing is not None:  # a package installed later comes with an agent restart
            return self._missing
        try:
            import pynvml
        except ImportError as exc:
            self._missing = NvmlReadings(
                available=False, reason=f"nvidia-ml-py not importable ({exc}): {INSTALL_HINT}"
            )
            return self._missing
        if self._nvml is None:
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError as exc:
                return NvmlReadings(
                    available=False,
                    reason=f"NVML unavailable ({exc}); expected on a Jetson, where the Jetson "
                    "collectors answer",
                )
            self._nvml = pynvml
        try:
            gpus = tuple(_read_gpu(pynvml, i) for i in range(int(pynvml.nvmlDeviceGetCount())))
        except pynvml.NVMLError as exc:
            self.close()
            return NvmlReadings(available=False, reason=f"NVML query failed: {exc}")
        if not gpus:
            return NvmlReadings(available=False, reason="NVML sees no GPU")
        return NvmlReadings(available=True, gpus=gpus)

    def close(self) -> None:
        """Shut NVML down if this collector initialised it."""
        nvml, self._nvml = self._nvml, None
        if nvml is not None:
            with contextlib.suppress(nvml.NVMLError):
                nvml.nvmlShutdown()


def _read_gpu(nvml: Any, index: int) -> GpuReading:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)

    def optional(function: Callable[..., T], *args: Any) -> T | None:
        try:
            return function(*args)
        except nvml.NVMLError_NotSupported:
            return None

    utilization = optional(nvml.nvmlDeviceGetUtilizationRates, handle)
    memory = optional(nvml.nvmlDeviceGetMemoryInfo, handle)
    temperature = optional(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)
    power = optional(nvml.nvmlDeviceGetPowerUsage, handle)
    sm_clock = optional(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM)
    uuid = optional(nvml.nvmlDeviceGetUUID, handle)
    return GpuReading(
        index=index,
        name=str(nvml.nvmlDeviceGetName(handle)),
        uuid=str(uuid) if uuid is not None else None,
        utilization_percent=float(utilization.gpu) if utilization is not None else None,
        memory_used_bytes=int(memory.used) if memory is not None else None,
        memory_total_bytes=int(memory.total) if memory is not None else None,
        temperature_c=float(temperature) if temperature is not None else None,
        power_draw_mw=int(power) if power is not None else None,
        sm_clock_mhz=int(sm_clock) if sm_clock is not None else None,
    )
