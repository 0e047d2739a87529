"""Per-layer times of a TensorRT engine through ``trt.IProfiler`` (tested only where TRT imports).

Written to the documented TensorRT 10 Python API: a subclass of ``trt.IProfiler`` that calls
``trt.IProfiler.__init__(self)`` and implements ``report_layer_time(layer_name, ms)`` is set as
``context.profiler``; TensorRT then calls it once per layer after every ``execute_async_v3`` (or
``execute_v2``). Layer names are the ONNX node names when the engine was built with profiling
verbosity above NONE, else layer indices. The profile runs on its own execution context and I/O
buffers, beside the serving one, and frees them afterwards (contexts before the engine).

On a DLA engine the layers TensorRT hands to the DLA appear as ``{ForeignNode[...]}`` layers;
they are attributed to the DLA and every other layer to the GPU **[UNVERIFIED: no Jetson was
available; the engine inspector's per-layer JSON would be the authoritative source]**.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from agent.errors import InferenceError, ModelLoadError
from agent.hardware.runtime_kinds import TENSORRT
from agent.jobs.profiling import NodeRecord, trt_layer_op
from agent.runtimes import cuda_arena
from agent.runtimes.trt import _shared_runtime, _trt
from shared.jobs import ProcessingUnit

H2D = 1
D2H = 2


def _call(function: str, *args: Any) -> Any:
    try:
        return cuda_arena.call(function, *args)
    except (cuda_arena.CudaError, cuda_arena.CudaUnavailable) as exc:
        raise InferenceError(str(exc)) from exc


def profile_trt(
    path: Path,
    feeds: Mapping[str, np.ndarray],
    runs: int,
    warmups: int = 2,
    dla_core: int | None = None,
) -> tuple[list[NodeRecord], int]:
    """Run the plan at ``path`` ``warmups + runs`` times; the layer records of the timed runs."""
    trt = _trt()
    runtime, logger = _shared_runtime(trt, dla_core)
    logger.errors.clear()
    engine = runtime.deserialize_cuda_engine(path.read_bytes())
    if engine is None:
        raise ModelLoadError("TensorRT refused the plan: " + "; ".join(logger.errors))
    records: list[NodeRecord] = []
    timing = [False]

    class LayerProfiler(trt.IProfiler):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            trt.IProfiler.__init__(self)

        def report_layer_time(self, layer_name: str, ms: float) -> None:
            if not timing[0]:
                return
            foreign = layer_name.startswith("{ForeignNode")
            device: ProcessingUnit = "DLA" if dla_core is not None and foreign else "GPU"
            records.append(
                NodeRecord(layer_name, trt_layer_op(layer_name), TENSORRT.name, device, float(ms))
            )

    context = engine.create_execution_context()
    if context is None:
        raise ModelLoadError("TensorRT could not create an execution context")
    context.profiler = LayerProfiler()
    stream = _call("cudaStreamCreate")
    pointers: list[int] = []
    try:
        outputs: dict[str, np.ndarray] = {}
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
                host = np.ascontiguousarray(feeds[name])
                context.set_input_shape(name, host.shape)
                ptr = int(_call("cudaMalloc", max(host.nbytes, 256)))
                pointers.append(ptr)
                _call("cudaMemcpyAsync", ptr, host.ctypes.data, host.nbytes, H2D, stream)
                context.set_tensor_address(name, ptr)
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            if engine.get_tensor_mode(name) != trt.TensorIOMode.INPUT:
                dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
                out = np.empty(tuple(context.get_tensor_shape(name)), dtype)
                ptr = int(_call("cudaMalloc", max(out.nbytes, 256)))
                pointers.append(ptr)
                context.set_tensor_address(name, ptr)
                outputs[name] = out
        for run in range(warmups + runs):
            timing[0] = run >= warmups
            if not context.execute_async_v3(stream_handle=int(stream)):
                raise InferenceError("TensorRT execute_async_v3 failed while profiling")
            _call("cudaStreamSynchronize", stream)
    finally:
        context = None
        gc.collect()
        engine = None
        gc.collect()
        for ptr in pointers:
            cuda_arena.free(ptr)
        _call("cudaStreamDestroy", stream)
    return records, runs
