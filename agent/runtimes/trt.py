"""TensorRT as a runtime: load a plan, describe its I/O, infer, refit. The only serving-side TRT
importer.

Written to the documented TensorRT 10 API (tensorrt-notes.md §1.4, §2.3-2.8):

* one long-lived ``trt.Runtime`` per (device, DLA core), with a capturing logger, so a refused
  plan (``deserialize_cuda_engine`` answers None) becomes a ModelLoadError carrying TensorRT's own
  words; the plan header is checked first (:mod:`agent.engines.plan_header`);
* execution contexts are created ``USER_MANAGED`` (``ExecutionContextAllocationStrategy``) and
  bound with ``set_device_memory`` to a lane of the process's shared activation arena
  (:mod:`agent.runtimes.cuda_arena`), reserved at ``device_memory_size_v2`` (the max over
  profiles); one
  context per lane, so the delegate config's ``streams`` requests run concurrently;
* I/O device buffers are per lane and grow-only, so steady serving allocates nothing;
* ``close`` drops the contexts before the engine (§2.8; NVIDIA/TensorRT#1072), then frees the
  I/O buffers; the arena and the runtime live on;
* :meth:`TrtModel.refit_from_onnx` updates weights in place (``trt.Refitter`` +
  ``trt.OnnxParserRefitter``, §2.7) for engines built refittable; the caller guarantees that no
  inference runs on the engine meanwhile (the hot-swap pauses and drains its intake).

Tests of this module are marked ``tensorrt`` and skip without TensorRT.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agent.engines.plan_header import PlanMismatch, check_plan
from agent.errors import InferenceError, ModelLoadError
from agent.runtimes import cuda_arena
from agent.runtimes.base import NUMPY_TO_KSERVE, TensorSpec

H2D = 1
D2H = 2

_lock = threading.Lock()
_runtimes: dict[int | None, tuple[Any, Any]] = {}


def _trt() -> Any:
    try:
        import tensorrt as trt
    except ImportError as exc:
        raise ModelLoadError(
            f"TensorRT not importable ({exc}): install JetPack's python3-libnvinfer or run "
            "with runtime onnxruntime"
        ) from exc
    return trt


def _shared_runtime(trt: Any, dla_core: int | None = None) -> tuple[Any, Any]:
    """The process's TensorRT runtime for ``dla_core`` and its capturing logger (created once)."""
    with _lock:
        if dla_core not in _runtimes:

            class CapturingLogger(trt.ILogger):  # type: ignore[misc]
                def __init__(self) -> None:
                    trt.ILogger.__init__(self)
                    self.errors: list[str] = []

                def log(self, severity: Any, msg: str) -> None:
                    if severity <= trt.ILogger.Severity.ERROR:
                        self.errors.append(msg)

            logger = CapturingLogger()
            runtime = trt.Runtime(logger)
            if dla_core is not None:
                runtime.DLA_core = dla_core
            _runtimes[dla_core] = (runtime, logger)
        return _runtimes[dla_core]


def _cuda(function: str, *args: Any) -> Any:
    try:
        return cuda_arena.call(function, *args)
    except (cuda_arena.CudaError, cuda_arena.CudaUnavailable) as exc:
        raise InferenceError(str(exc)) from exc


class _Buffers:
    """Grow-only device buffers of one lane, by tensor name."""

    def __init__(self) -> None:
        self.ptrs: dict[str, tuple[int, int]] = {}

    def get(self, name: str, nbytes: int) -> int:
        ptr, size = self.ptrs.get(name, (0, 0))
        if nbytes > size:
            if ptr:
                _cuda("cudaFree", ptr)
            ptr, size = int(_cuda("cudaMalloc", max(nbytes, 256))), max(nbytes, 256)
            self.ptrs[name] = (ptr, size)
        return ptr

    def free(self) -> None:
        for ptr, _ in self.ptrs.values():
            cuda_arena.free(ptr)
        self.ptrs.clear()


class TrtModel:
    """One engine with one USER_MANAGED context per arena lane."""

    def __init__(self, trt: Any, engine: Any, logger: Any, arena: cuda_arena.ActivationArena):
        self._trt = trt
        self._engine: Any = engine
        self._logger = logger
        self._arena = arena
        self.activation_bytes = int(engine.device_memory_size_v2)
        arena.reserve(self.activation_bytes)
        strategy = trt.ExecutionContextAllocationStrategy.USER_MANAGED
        self._contexts: list[Any] = [
            engine.create_execution_context(strategy) for _ in range(arena.lanes)
        ]
        if any(ctx is None for ctx in self._contexts):
            raise ModelLoadError("TensorRT could not create an execution context")
        self._bound = [-1] * arena.lanes
        self._buffers = [_Buffers() for _ in range(arena.lanes)]
        inputs: list[TensorSpec] = []
        outputs: list[TensorSpec] = []
        self._dtypes: dict[str, np.dtype[Any]] = {}
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
            datatype = NUMPY_TO_KSERVE.get(np.dtype(dtype).name)
            if datatype is None:
                raise ModelLoadError(f"tensor {name!r} has type {dtype}, which is not served")
            self._dtypes[name] = dtype
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

    @property
    def refittable(self) -> bool:
        return bool(getattr(self._engine, "refittable", False))

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if not self._contexts:
            raise InferenceError("model was unloaded")
        with self._arena.lane() as lane:
            ctx = self._contexts[lane.index]
            if self._bound[lane.index] != lane.generation:
                ctx.set_device_memory(lane.ptr, lane.size)
                self._bound[lane.index] = lane.generation
            buffers = self._buffers[lane.index]
            for spec in self._inputs:
                host = np.ascontiguousarray(feeds[spec.name])
                ctx.set_input_shape(spec.name, host.shape)
                ptr = buffers.get(spec.name, host.nbytes)
                _cuda("cudaMemcpyAsync", ptr, host.ctypes.data, host.nbytes, H2D, lane.stream)
                ctx.set_tensor_address(spec.name, ptr)
            results: dict[str, np.ndarray] = {}
            for spec in self._outputs:
                out = np.empty(tuple(ctx.get_tensor_shape(spec.name)), self._dtypes[spec.name])
                ctx.set_tensor_address(spec.name, buffers.get(spec.name, out.nbytes))
                results[spec.name] = out
            if not ctx.execute_async_v3(stream_handle=lane.stream_handle):
                raise InferenceError("TensorRT execute_async_v3 failed")
            for spec in self._outputs:
                out = results[spec.name]
                ptr = buffers.ptrs[spec.name][0]
                _cuda("cudaMemcpyAsync", out.ctypes.data, ptr, out.nbytes, D2H, lane.stream)
            _cuda("cudaStreamSynchronize", lane.stream)
            return results

    def refit_from_onnx(self, onnx_path: Path) -> None:
        """Replace the weights with ``onnx_path``'s (same topology); ModelLoadError if refused."""
        trt = self._trt
        if not self.refittable:
            raise ModelLoadError("the engine was not built refittable (BuilderFlag.REFIT)")
        self._logger.errors.clear()
        refitter = trt.Refitter(self._engine, self._logger)
        parser = trt.OnnxParserRefitter(refitter, self._logger)
        if not parser.refit_from_file(str(onnx_path)):
            raise ModelLoadError(
                "TensorRT cannot refit from the new ONNX (topology changed?): "
                + ("; ".join(self._logger.errors) or "no reason logged")
            )
        missing = refitter.get_missing_weights()
        if missing:
            raise ModelLoadError(f"refit lacks weights: {', '.join(missing)}")
        if not refitter.refit_cuda_engine():
            raise ModelLoadError(
                "TensorRT refit_cuda_engine failed: " + "; ".join(self._logger.errors)
            )

    def close(self) -> None:
        """Contexts first, then the engine, then the I/O buffers (tensorrt-notes.md §2.8)."""
        if not self._contexts and self._engine is None:
            return
        self._arena.synchronize()
        self._contexts = []
        gc.collect()
        self._engine = None
        gc.collect()
        for buffers in self._buffers:
            buffers.free()


def load_trt(
    path: Path, *, intra_op_threads: int = 1, streams: int = 1, dla_core: int | None = None
) -> TrtModel:
    """Deserialize the plan at ``path``; ModelLoadError with TensorRT's own words when refused.

    ``streams`` sizes the process's arena lanes the first time an engine loads.
    """
    trt = _trt()
    blob = path.read_bytes()
    try:
        check_plan(blob, str(trt.__version__))
    except PlanMismatch as exc:
        raise ModelLoadError(str(exc)) from exc
    runtime, logger = _shared_runtime(trt, dla_core)
    with _lock:
        logger.errors.clear()
        engine = runtime.deserialize_cuda_engine(blob)
        errors = list(logger.errors)
    if engine is None:
        raise ModelLoadError(
            "TensorRT refused the plan: " + ("; ".join(errors) or "no reason logged")
        )
    try:
        arena = cuda_arena.shared_arena(max(1, streams))
    except (cuda_arena.CudaError, cuda_arena.CudaUnavailable) as exc:
        raise ModelLoadError(f"cannot set up the CUDA activation arena: {exc}") from exc
    return TrtModel(trt, engine, logger, arena)
