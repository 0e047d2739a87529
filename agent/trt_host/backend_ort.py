"""The host's CPU backend: ONNX Runtime behind the same interface as TensorRT, for CI.

Chosen with ``--backend onnxruntime``; onnxruntime is imported when this backend is created, never
by a TensorRT host. Its "build" is ONNX Runtime's optimised-model save
(``SessionOptions.optimized_model_filepath``), with one progress line per step, so the build
path of the protocol (streamed progress, the result, failures) runs where TensorRT cannot.

Python 3.8 syntax; standard library, numpy and onnxruntime only.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import numpy as np

ORT_TO_KSERVE = {
    "tensor(bool)": "BOOL",
    "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16",
    "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64",
    "tensor(int8)": "INT8",
    "tensor(int16)": "INT16",
    "tensor(int32)": "INT32",
    "tensor(int64)": "INT64",
    "tensor(float16)": "FP16",
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
}

LEVELS = ("disable", "basic", "extended", "all")


def _spec(arg: Any) -> dict[str, Any]:
    datatype = ORT_TO_KSERVE.get(arg.type)
    if datatype is None:
        raise TypeError(f"tensor {arg.name!r} has type {arg.type}, which is not served yet")
    shape = [d if isinstance(d, int) and d >= 0 else -1 for d in arg.shape]
    return {"name": arg.name, "datatype": datatype, "shape": shape}


class OrtBackend:
    """ONNX Runtime on the CPU provider; a handle is an ``InferenceSession``."""

    name = "onnxruntime"

    def __init__(self) -> None:
        import onnxruntime

        self.ort: Any = onnxruntime

    def version(self) -> str:
        return str(self.ort.__version__)

    def _options(self, options: dict[str, Any]) -> Any:
        level = options.get("optimization_level", "all")
        if level not in LEVELS:
            raise ValueError(f"optimization_level {level!r} is not one of {', '.join(LEVELS)}")
        levels = self.ort.GraphOptimizationLevel
        session_options = self.ort.SessionOptions()
        session_options.intra_op_num_threads = int(options.get("intra_op_threads", 1))
        session_options.inter_op_num_threads = 1
        session_options.graph_optimization_level = {
            "disable": levels.ORT_DISABLE_ALL,
            "basic": levels.ORT_ENABLE_BASIC,
            "extended": levels.ORT_ENABLE_EXTENDED,
            "all": levels.ORT_ENABLE_ALL,
        }[level]
        return session_options

    def load(self, path: str, options: dict[str, Any]) -> object:
        return self.ort.InferenceSession(
            path, sess_options=self._options(options), providers=["CPUExecutionProvider"]
        )

    def io(self, handle: Any) -> dict[str, list[dict[str, Any]]]:
        return {
            "inputs": [_spec(a) for a in handle.get_inputs()],
            "outputs": [_spec(a) for a in handle.get_outputs()],
        }

    def infer(self, handle: Any, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [a.name for a in handle.get_outputs()]
        results = handle.run(names, arrays)
        return {name: np.asarray(results[i]) for i, name in enumerate(names)}

    def unload(self, handle: object) -> None:
        del handle  # the session is freed with its last reference

    def build(
        self,
        source: str,
        target: str,
        options: dict[str, Any],
        progress: Callable[[str], None],
    ) -> dict[str, Any]:
        started = time.monotonic()
        progress(f"reading {source} ({os.path.getsize(source)} bytes)")
        options = {"optimization_level": "extended", **options}  # "all" is hardware-specific
        session_options = self._options(options)
        level = options["optimization_level"]
        progress(f"optimizing the graph (level {level})")
        partial = target + ".partial"
        session_options.optimized_model_filepath = partial
        session = self.ort.InferenceSession(
            source, sess_options=session_options, providers=["CPUExecutionProvider"]
        )
        del session
        progress(f"saving {target}")
        os.replace(partial, target)
        size = os.path.getsize(target)
        seconds = time.monotonic() - started
        progress(f"built {target}: {size} bytes in {seconds:.2f} s")
        return {"path": target, "bytes": size, "seconds": seconds}


def create() -> OrtBackend:
    return OrtBackend()
