"""The CUDA device as CUDA Python (``cuda-python`` / ``cuda-bindings``) sees it.

The only module of the probe that imports CUDA Python. Newer releases expose the runtime API as
``cuda.bindings.runtime``; older ones as ``cuda.cudart``; both are tried, newest first. Every call
answers ``(error, *values)``; an error other than ``cudaSuccess`` makes the source absent with the
error's name (``cudaErrorNoDevice``, ``cudaErrorInsufficientDriver``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from shared.facts import FactSource, GpuFacts

RUNTIME_MODULES = ("cuda.bindings.runtime", "cuda.cudart")
INSTALL_HINT = "pip install cuda-python to report SM count and CUDA versions"


class _CudaCallFailed(Exception):
    """A CUDA runtime call answered an error code."""


@dataclass(frozen=True)
class CudaProbe:
    """Device 0's facts, the CUDA runtime version of the bindings, and the source's state."""

    gpu: GpuFacts | None
    source: FactSource
    runtime_version: str | None = None
    integrated: bool | None = None


def cuda_version_text(encoded: int) -> str:
    """CUDA's integer version (``12060``) → ``12.6``."""
    return f"{encoded // 1000}.{(encoded % 1000) // 10}"


def _import_runtime() -> tuple[ModuleType | None, str]:
    errors = []
    for name in RUNTIME_MODULES:
        try:
            return importlib.import_module(name), ""
        except ImportError as exc:
            errors.append(f"{name}: {exc}")
    return None, "; ".join(errors)


def _call(runtime: ModuleType, function: str, *args: Any) -> Any:
    result = getattr(runtime, function)(*args)
    error, values = result[0], result[1:]
    if error != runtime.cudaError_t.cudaSuccess:
        raise _CudaCallFailed(f"{function} failed: {getattr(error, 'name', error)}")
    return values[0] if len(values) == 1 else values


def _text(value: Any) -> str:
    raw = bytes(value) if isinstance(value, (bytes, bytearray)) else str(value).encode()
    return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace").strip()


def probe_cuda() -> CudaProbe:
    """Facts of CUDA device 0; absent with the reason when CUDA Python or a device is missing."""
    runtime, import_errors = _import_runtime()
    if runtime is None:
        reason = f"CUDA Python not importable ({import_errors}): {INSTALL_HINT}"
        return CudaProbe(gpu=None, source=FactSource(available=False, reason=reason))
    try:
        driver = int(_call(runtime, "cudaDriverGetVersion"))
        runtime_version = int(_call(runtime, "cudaRuntimeGetVersion"))
        count = int(_call(runtime, "cudaGetDeviceCount"))
        if count < 1:
            raise _CudaCallFailed("the CUDA runtime sees no device")
        props = _call(runtime, "cudaGetDeviceProperties", 0)
    except (_CudaCallFailed, RuntimeError, OSError) as exc:
        return CudaProbe(gpu=None, source=FactSource(available=False, reason=f"CUDA: {exc}"))
    gpu = GpuFacts(
        name=_text(props.name) or None,
        compute_capability=f"{int(props.major)}.{int(props.minor)}",
        sm_count=int(props.multiProcessorCount),
        memory_total_bytes=int(props.totalGlobalMem),
        cuda_version=cuda_version_text(driver) if driver else None,
    )
    return CudaProbe(
        gpu=gpu,
        source=FactSource(available=True),
        runtime_version=cuda_version_text(runtime_version),
        integrated=bool(props.integrated),
    )
