"""ONNX Runtime on the CPU provider: the only module that imports onnxruntime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from agent.errors import InferenceError, ModelLoadError
from agent.runtime import TensorSpec

PROVIDERS = ["CPUExecutionProvider"]

_ORT_TO_KSERVE = {
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


def _spec(arg: Any) -> TensorSpec:
    datatype = _ORT_TO_KSERVE.get(arg.type)
    if datatype is None:
        raise ModelLoadError(f"tensor {arg.name!r} has type {arg.type}, which is not served yet")
    shape = tuple(d if isinstance(d, int) and d >= 0 else -1 for d in arg.shape)
    return TensorSpec(name=arg.name, datatype=datatype, shape=shape)


class OrtModel:
    """One InferenceSession; thread-safe for concurrent ``infer`` calls, as ORT sessions are."""

    def __init__(self, session: ort.InferenceSession) -> None:
        self._session: ort.InferenceSession | None = session
        self._inputs = tuple(_spec(a) for a in session.get_inputs())
        self._outputs = tuple(_spec(a) for a in session.get_outputs())

    @property
    def inputs(self) -> Sequence[TensorSpec]:
        return self._inputs

    @property
    def outputs(self) -> Sequence[TensorSpec]:
        return self._outputs

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        session = self._session
        if session is None:
            raise InferenceError("model was unloaded")
        names = [spec.name for spec in self._outputs]
        try:
            results = session.run(names, dict(feeds))
        except Exception as exc:
            raise InferenceError(f"onnxruntime failed: {exc}") from exc
        return {name: np.asarray(value) for name, value in zip(names, results, strict=True)}

    def close(self) -> None:
        self._session = None


def load_ort(path: Path, *, intra_op_threads: int = 1) -> OrtModel:
    """Load ``path`` on the CPU provider; ModelLoadError saying why when ORT refuses it."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(str(path), sess_options=options, providers=PROVIDERS)
    except Exception as exc:
        raise ModelLoadError(f"onnxruntime cannot load {path.name}: {exc}") from exc
    return OrtModel(session)
