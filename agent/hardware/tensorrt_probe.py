"""TensorRT as a facts source: the only module of the probe that imports ``tensorrt``.

``tensorrt.__version__`` is the full version the engine validity key needs (Python has no
``getInferLibVersion`` binding, tensorrt-notes.md §1.4). A runtime is created once to count DLA
cores (``IRuntime.num_DLA_cores``, as Triton does); creating it also proves a CUDA device answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.messages import FactSource

INSTALL_HINT = "install JetPack's python3-libnvinfer or run with runtime onnxruntime"


@dataclass(frozen=True)
class TensorRTProbe:
    """TensorRT's version, and what a runtime said when one could be created."""

    version: str | None
    source: FactSource
    runtime_created: bool = False
    dla_cores: int | None = None


def probe_tensorrt() -> TensorRTProbe:
    """Import TensorRT; absent with the import error and the fix when it does not import."""
    try:
        import tensorrt as trt
    except ImportError as exc:
        return TensorRTProbe(
            version=None,
            source=FactSource(
                available=False, reason=f"TensorRT not importable ({exc}): {INSTALL_HINT}"
            ),
        )
    version = str(trt.__version__)
    try:
        runtime = trt.Runtime(trt.Logger(trt.Logger.ERROR))
        dla_cores = int(runtime.num_DLA_cores)
    except (TypeError, RuntimeError, AttributeError):
        return TensorRTProbe(version=version, source=FactSource(available=True))
    return TensorRTProbe(
        version=version,
        source=FactSource(available=True),
        runtime_created=True,
        dla_cores=dla_cores,
    )
