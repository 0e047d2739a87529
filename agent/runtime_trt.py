"""TensorRT as a runtime: load a plan, describe its I/O, infer. The only serving-side TRT importer.

Written to the documented TensorRT 10 API (tensorrt-notes.md §1.4, §2.3, §2.8): one long-lived
``trt.Runtime`` per process with a capturing logger, so a refused plan (``deserialize_cuda_engine``
answers None) becomes a ModelLoadError carrying TensorRT's own words; the plan header is checked
first (:mod:`agent.engines.plan_header`). Device buffers come from PyTorch-free CUDA Python
(``cuda.bindings.runtime``); tests of this module are marked ``tensorrt`` and skip without it.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agent.engines.plan_header import PlanMismatch, check_plan
from agent.errors import InferenceError, ModelLoadError
from agent.runtime import NUMPY_TO_KSERVE, TensorSpec

_lock = threading.Lock()
_runtime: Any = None
_logger: Any = None


def _trt() -> Any:
    try:
        import tensorrt as trt
    except ImportError as exc:
        raise ModelLoadError(
            f"TensorRT not importable ({exc}): install JetPack's python3-libnvinfer or run "
            "with runtime onnxruntime"
        ) from exc
    return trt


def _cudart() -> Any:
    try:
        cudart = importlib.import_module("cuda.bindings.runtime")
    except ImportError as exc:
        raise ModelLoadError(
            f"CUDA Python not importable ({exc}): pip install cuda-bindings"
        ) from exc
    return cudart


def _shared_runtime(trt: Any) -> tuple[Any, Any]:
    """The process's one TensorRT runtime and its capturing logger (created on first use)."""
    global _runtime, _logger
    with _lock:
        if _runtime is None:

            class CapturingLogger(trt.ILogger):  # type: ignore[misc]
                def __init__(self) -> None:
                    trt.ILogger.__init__(self)
                    self.errors: list[str] = []

                def log(self, severity: Any, msg: str) -> None:
                    if severity <= trt.ILogger.Severity.ERROR:
                        self.errors.append(msg)

            _logger = CapturingLogger()
            _runtime = trt.Runtime(_logger)
        return _runtime, _logger


def _check(cudart: Any, result: Any) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise InferenceError(f"CUDA call failed: {err}")
    return rest[0] if len(rest) == 1 else rest


class TrtModel:
    """One engine and one execution context; calls are serialised (one context, one stream)."""

    def __init__(self, trt: Any, engine: Any) -> None:
        self._trt = trt
        self._engine: Any = engine
        self._context: Any = engine.create_execution_context()
        self._lock = threading.Lock()
        inputs: list[TensorSpec] = []
        outputs: list[TensorSpec] = []
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
            datatype = NUMPY_TO_KSERVE.get(dtype)
            if datatype is None:
                raise ModelLoadError(f"tensor {name!r} has type {dtype}, which is not served")
            spec = TensorSpec(name, datatype, tuple(int(d) for d in engine.get_tensor_shape(name)))
            is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            (inputs if is_input else outputs).append(spec)
        self._inputs, self._outputs = tuple(inputs), tuple(outputs)

    @property
    def inputs(self) -> Sequence[TensorSpec]:
        return self._inputs

    @property
    def outputs(self) -> Sequence[TensorSpec]:
        return self._outputs

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self._context is None:
            raise InferenceError("model was unloaded")
        cudart = _cudart()
        with self._lock:
            ctx = self._context
            stream = _check(cudart, cudart.cudaStreamCreate())
            buffers: list[int] = []
            try:
                for spec in self._inputs:
                    host = np.ascontiguousarray(feeds[spec.name])
                    ctx.set_input_shape(spec.name, host.shape)
                    ptr = _check(cudart, cudart.cudaMalloc(max(host.nbytes, 1)))
                    buffers.append(ptr)
                    _check(cudart, cudart.cudaMemcpy(ptr, host.ctypes.data, host.nbytes, 1))
                    ctx.set_tensor_address(spec.name, ptr)
                results: dict[str, np.ndarray] = {}
                for spec in self._outputs:
                    shape = tuple(ctx.get_tensor_shape(spec.name))
                    out = np.empty(
                        shape, dtype=self._trt.nptype(self._engine.get_tensor_dtype(spec.name))
                    )
                    ptr = _check(cudart, cudart.cudaMalloc(max(out.nbytes, 1)))
                    buffers.append(ptr)
                    ctx.set_tensor_address(spec.name, ptr)
                    results[spec.name] = out
                if not ctx.execute_async_v3(stream_handle=int(stream)):
                    raise InferenceError("TensorRT execute_async_v3 failed")
                _check(cudart, cudart.cudaStreamSynchronize(stream))
                for spec, ptr in zip(self._outputs, buffers[len(self._inputs) :], strict=True):
                    out = results[spec.name]
                    _check(cudart, cudart.cudaMemcpy(out.ctypes.data, ptr, out.nbytes, 2))
                return results
            finally:
                for ptr in buffers:
                    cudart.cudaFree(ptr)
                cudart.cudaStreamDestroy(stream)

    def close(self) -> None:
        with self._lock:
            self._context = None
            self._engine = None


def load_trt(path: Path, *, intra_op_threads: int = 1) -> TrtModel:
    """Deserialize the plan at ``path``; ModelLoadError with TensorRT's own words when refused."""
    trt = _trt()
    blob = path.read_bytes()
    try:
        check_plan(blob, str(trt.__version__))
    except PlanMismatch as exc:
        raise ModelLoadError(str(exc)) from exc
    runtime, logger = _shared_runtime(trt)
    with _lock:
        logger.errors.clear()
        engine = runtime.deserialize_cuda_engine(blob)
        errors = list(logger.errors)
    if engine is None:
        raise ModelLoadError(
            "TensorRT refused the plan: " + ("; ".join(errors) or "no reason logged")
        )
    return TrtModel(trt, engine)
