"""TensorRT as a facts source, asked through the interpreter that can import it.

The agent's process never imports ``tensorrt`` (JetPack ships it for JetPack's Python, not the
agent's): :func:`agent.hardware.trt_python.find_tensorrt_python` runs a probe child under the
``tensorrt_python`` setting or JetPack's interpreters, which reports ``tensorrt.__version__`` (the
full version the engine validity key needs, docs/tensorrt.md#reading-a-plans-version), creates a
runtime to count DLA cores (``IRuntime.num_DLA_cores``, as Triton does; creating it also proves a
CUDA device answers) and reads libcudart's runtime and driver versions.

TensorRT counts as available only when that release is supported (8.5 to the newest,
:mod:`agent.trt_host.versions`); an unsupported one is absent with the reason, and the doctor
names the package to install.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent.hardware.trt_python import TrtPython, find_tensorrt_python
from shared.facts import FactSource, GpuFacts

INSTALL_HINT = (
    "install python3-libnvinfer (JetPack) or NVIDIA's tensorrt wheel (x86; `jetfleet-agent "
    "doctor` names the exact package), or run with runtime onnxruntime"
)


@dataclass(frozen=True)
class TensorRTProbe:
    """TensorRT's version where it can serve, and what its interpreter said."""

    version: str | None
    source: FactSource
    runtime_created: bool = False
    dla_cores: int | None = None
    python: TrtPython | None = None
    """The interpreter search's answer (also when it found nothing usable)."""

    @property
    def cudart(self) -> FactSource:
        """libcudart as the TensorRT interpreter loads it: the host's own CUDA layer."""
        found = self.python
        if found is not None and (found.cuda_devices or 0) > 0:
            return FactSource(available=True)
        if found is None or not found.python_version:
            return FactSource(available=False, reason="no interpreter answered the TensorRT probe")
        return FactSource(
            available=False,
            reason=f"under {found.candidate}: {found.cuda_error or 'no CUDA device is visible'}",
        )

    @property
    def gpu(self) -> GpuFacts | None:
        """The CUDA driver version libcudart reported there (cuda-python may be absent)."""
        driver = self.python.cuda_driver_version if self.python else None
        return GpuFacts(cuda_version=driver) if driver else None


def probe_tensorrt(
    configured: str | None = None,
    find: Callable[[str | None], TrtPython] = find_tensorrt_python,
) -> TensorRTProbe:
    """TensorRT under ``configured`` or JetPack's interpreters; absent with the reason and fix."""
    found = find(configured)
    if not found.usable:
        what = (
            f"TensorRT {found.tensorrt_version} not supported"
            if found.tensorrt_version
            else "TensorRT not importable"
        )
        reason = f"{what} ({found.reason}): {INSTALL_HINT}"
        return TensorRTProbe(
            version=None, source=FactSource(available=False, reason=reason), python=found
        )
    return TensorRTProbe(
        version=found.tensorrt_version,
        source=FactSource(available=True),
        runtime_created=found.runtime_created,
        dla_cores=found.dla_cores if found.runtime_created else None,
        python=found,
    )
