"""The host's TensorRT backend: plans loaded on the shared activation arena, builds, refit, profile.

Chosen with ``--backend tensorrt`` (the default): :func:`create` imports ``tensorrt``, reads its
release into :class:`~.versions.Capabilities` and opens libcudart (:mod:`.cudart`). Everything
below takes ``trt``, the capabilities and the CUDA binding as parameters, so the conformance
suite (tests/tensorrt_api) runs this backend against every release's stand-in.

- ``load``: the plan through :mod:`.engine` (header check, TensorRT's own words on refusal) with
  the slot's options ``streams`` (arena lanes, fixed by the first load of the host, as before) and
  ``dla_core``; one context per arena lane, each bound to its lane's memory and rebound when the
  arena grows (:mod:`.arena`).
- ``infer``: borrows a lane, runs that lane's context (``Context.infer`` copies in and out with
  named ``cudaMemcpyKind`` constants).
- ``build``: :mod:`.build` from plain options (:func:`build_options`), the plan written atomically,
  the timing cache saved beside it; progress lines through the server.
- ``refit`` (:mod:`.refit`) and ``profile`` (:mod:`.profiler`) on a loaded model.
- ``unload``: waits for the lanes, contexts before the engine.

Python 3.8 syntax; standard library, numpy, tensorrt and libcudart only.
Concurrency: the server's loop thread calls every method but ``build`` (its own thread, touching
no loaded model); one build at a time per host.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np

from . import build as build_module
from . import engine as engine_module
from . import profiler, refit
from .arena import ActivationArena
from .versions import Capabilities

KSERVE_BY_NUMPY = {
    "bool": "BOOL",
    "uint8": "UINT8",
    "int8": "INT8",
    "int32": "INT32",
    "int64": "INT64",
    "float16": "FP16",
    "float32": "FP32",
}

_OPTION_FIELDS = (
    "precision",
    "tf32",
    "workspace_bytes",
    "dla_core",
    "gpu_fallback",
    "disabled_tactic_sources",
    "refittable",
    "use_timing_cache",
    "strongly_typed",
    "optimization_level",
    "max_aux_streams",
    "profiling_verbosity",
)


def build_options(plain: Mapping[str, Any]) -> build_module.BuildOptions:
    """:class:`~.build.BuildOptions` from a request's plain JSON options.

    ``profiles``: a list of profiles, each a list of ``{input, min, opt, max}``; the caches come
    as file paths (``timing_cache_path``, read when it exists; ``calibration_cache_path``);
    ``calibration_inputs_path``: an NPZ of sample inputs to calibrate INT8 with on this device.
    Unknown keys are refused, so a typo never builds silently with a default.
    """
    known = set(_OPTION_FIELDS) | {"profiles", "timing_cache_path", "calibration_cache_path"}
    known |= {"calibration_inputs_path", "calibration_cache_out_path"}
    unknown = sorted(set(plain) - known)
    if unknown:
        raise build_module.BuildError(["unknown build options: %s" % ", ".join(unknown)])
    fields: Dict[str, Any] = {k: plain[k] for k in _OPTION_FIELDS if k in plain}
    if "disabled_tactic_sources" in fields:
        fields["disabled_tactic_sources"] = tuple(fields["disabled_tactic_sources"])
    fields["profiles"] = tuple(
        tuple(
            build_module.ShapeRange(
                str(r["input"]), tuple(r["min"]), tuple(r["opt"]), tuple(r["max"])
            )
            for r in profile
        )
        for profile in plain.get("profiles", ())
    )
    timing = plain.get("timing_cache_path")
    if timing and os.path.isfile(timing):
        with open(timing, "rb") as f:
            fields["timing_cache"] = f.read()
    calibration = plain.get("calibration_cache_path")
    if calibration:
        with open(calibration, "rb") as f:
            fields["calibration_cache"] = f.read()
    if plain.get("calibration_inputs_path"):
        fields["calibration_inputs"] = str(plain["calibration_inputs_path"])
    return build_module.BuildOptions(**fields)


def write_atomically(path: str, data: bytes) -> None:
    partial = path + ".partial"
    with open(partial, "wb") as f:
        f.write(data)
    os.replace(partial, path)


def run_build(
    trt: Any,
    caps: Capabilities,
    source: str,
    target: str,
    options: Mapping[str, Any],
    progress: Callable[[float, str], None],
    cuda: Any = None,
) -> Dict[str, Any]:
    """Build ``source`` (ONNX) into ``target`` (plan); BuildError with TensorRT's words. A cache
    that calibration from sample inputs wrote goes to ``calibration_cache_out_path`` if given."""
    started = time.monotonic()
    opts = build_options(options)
    with open(source, "rb") as f:
        onnx = f.read()
    result = build_module.build(trt, caps, onnx, opts, progress, cuda=cuda)
    write_atomically(target, result.plan)
    timing = options.get("timing_cache_path")
    if timing and result.timing_cache is not None:
        write_atomically(str(timing), result.timing_cache)
    calibrated = options.get("calibration_cache_out_path")
    if calibrated and result.calibration_cache is not None:
        write_atomically(str(calibrated), result.calibration_cache)
    return {
        "path": target,
        "bytes": len(result.plan),
        "seconds": time.monotonic() - started,
        "notes": list(result.notes),
    }


class LaneContext(engine_module.Context):
    """A context on one arena lane: the lane's memory and stream, its own I/O buffers."""

    def __init__(self, engine: engine_module.Engine, lane_index: int, stream: int) -> None:
        self.owner = engine
        self.cuda = engine.cuda
        self.ctx = engine.new_context()
        self.lane_index = lane_index
        self.stream = stream
        self.activation = 0
        self.activation_size = 0
        self.generation = -1
        self.buffers = {}
        self.allocator = None
        self.data_dependent = set()

    def close(self) -> None:
        """Drop the context and its I/O buffers; the lane's memory and stream are the arena's."""
        self.drop()


class TrtModel:
    """One loaded engine with one :class:`LaneContext` per arena lane."""

    def __init__(self, engine: engine_module.Engine, contexts: List[LaneContext]) -> None:
        self.engine = engine
        self.contexts = contexts


class TrtBackend:
    """TensorRT behind the host's ``Backend`` interface (see :mod:`.server`)."""

    name = "tensorrt"

    def __init__(self, trt: Any, caps: Capabilities, cuda: Any) -> None:
        self.trt, self.caps, self.cuda = trt, caps, cuda
        self.arena: Optional[ActivationArena] = None
        self._build_lock = threading.Lock()

    def version(self) -> str:
        return str(self.trt.__version__)

    def _arena(self, streams: int) -> ActivationArena:
        if self.arena is None:
            self.arena = ActivationArena(self.cuda, lanes=max(1, int(streams)))
        return self.arena

    def load(self, path: str, options: Dict[str, Any]) -> TrtModel:
        with open(path, "rb") as f:
            plan = f.read()
        dla = options.get("dla_core")
        engine = engine_module.load(
            self.trt, self.caps, self.cuda, plan, None if dla is None else int(dla)
        )
        try:
            arena = self._arena(int(options.get("streams", 1)))
            arena.reserve(max(engine.activation_bytes, 256))
            contexts = []
            for index in range(arena.lanes):
                ctx = LaneContext(engine, index, arena.stream(index))
                engine.contexts.append(ctx)
                contexts.append(ctx)
        except Exception:
            engine.close()
            raise
        return TrtModel(engine, contexts)

    def io(self, handle: TrtModel) -> Dict[str, List[Dict[str, Any]]]:
        def spec(info: engine_module.TensorInfo) -> Dict[str, Any]:
            datatype = KSERVE_BY_NUMPY.get(np.dtype(info.dtype).name)
            if datatype is None:
                raise TypeError(
                    "tensor %r has type %s, which is not served" % (info.name, info.dtype)
                )
            return {"name": info.name, "datatype": datatype, "shape": list(info.shape)}

        return {
            "inputs": [spec(t) for t in handle.engine.inputs],
            "outputs": [spec(t) for t in handle.engine.outputs],
        }

    def info(self, handle: TrtModel) -> Dict[str, Any]:
        """What the agent may ask besides I/O: refittable, activation bytes, arena lanes."""
        arena = self.arena
        return {
            "refittable": handle.engine.refittable,
            "activation_bytes": handle.engine.activation_bytes,
            "lanes": arena.lanes if arena is not None else 0,
        }

    def infer(self, handle: TrtModel, arrays: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        arena = self.arena
        if arena is None or not handle.contexts:
            raise engine_module.EngineError("the model was unloaded")
        with arena.lane() as lane:
            ctx = handle.contexts[lane.index]
            if ctx.generation != lane.generation:
                handle.engine.bind_memory(ctx.ctx, lane.ptr, lane.size)
                ctx.generation = lane.generation
            return ctx.infer(arrays)

    def unload(self, handle: TrtModel) -> None:
        if self.arena is not None:
            self.arena.synchronize()
        handle.contexts = []
        handle.engine.close()

    def refit(self, handle: TrtModel, onnx_path: str) -> Dict[str, Any]:
        """New weights from ``onnx_path`` in place (the agent has drained the model)."""
        if self.arena is not None:
            self.arena.synchronize()
        with open(onnx_path, "rb") as f:
            refit.refit(handle.engine, f.read())
        return {}

    def profile(
        self, handle: TrtModel, feeds: Dict[str, np.ndarray], runs: int, warmups: int
    ) -> Dict[str, Any]:
        """Per-layer times of ``runs`` timed runs on a context of its own."""
        layers = profiler.profile_layers(handle.engine, feeds, runs, warmups)
        return {"layers": [[name, ms] for name, ms in layers], "runs": runs}

    def build(
        self, source: str, target: str, options: Dict[str, Any], progress: Callable[[str], None]
    ) -> Dict[str, Any]:
        with self._build_lock:
            return run_build(
                self.trt,
                self.caps,
                source,
                target,
                options,
                lambda pct, message: progress("%.1f %s" % (pct, message)),
                self.cuda,
            )


def create() -> TrtBackend:
    """The backend on this interpreter's ``tensorrt`` and libcudart."""
    import tensorrt as trt

    from .cudart import CudaRuntime

    caps = Capabilities.for_version(str(trt.__version__))
    cuda = CudaRuntime()
    cuda.device_count()  # CudaUnavailable with CUDA's reason before any model is loaded
    return TrtBackend(trt, caps, cuda)
