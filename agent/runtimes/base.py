"""The runtime seam: what serving and reconcile need from a loaded model, whatever runs it.

ONNX Runtime (``agent.runtimes.ort``) implements it now; TensorRT joins behind the same Protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # numpy loads with the first model, not at agent start (idle RSS)
    import numpy as np

KSERVE_TO_NUMPY: dict[str, str] = {
    "BOOL": "bool",
    "UINT8": "uint8",
    "UINT16": "uint16",
    "UINT32": "uint32",
    "UINT64": "uint64",
    "INT8": "int8",
    "INT16": "int16",
    "INT32": "int32",
    "INT64": "int64",
    "FP16": "float16",
    "FP32": "float32",
    "FP64": "float64",
}
"""KServe v2 tensor datatype → numpy dtype name (BYTES is not served yet)."""

NUMPY_TO_KSERVE: dict[str, str] = {dtype: name for name, dtype in KSERVE_TO_NUMPY.items()}
"""numpy dtype name (``array.dtype.name``) → KServe v2 tensor datatype."""


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a model; ``-1`` in ``shape`` is a dynamic dimension."""

    name: str
    datatype: str
    shape: tuple[int, ...]


class LoadedModel(Protocol):
    """A model ready for inference; ``close`` releases what the runtime holds."""

    @property
    def inputs(self) -> Sequence[TensorSpec]: ...

    @property
    def outputs(self) -> Sequence[TensorSpec]: ...

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one inference; InferenceError when the runtime fails."""
        ...

    def close(self) -> None: ...


class ModelLoader(Protocol):
    """Loads a model file; ModelLoadError when the runtime refuses it."""

    def __call__(self, path: Path, *, intra_op_threads: int) -> LoadedModel: ...


def zeros_for(spec: TensorSpec) -> np.ndarray:
    """A zero tensor that fits ``spec`` (dynamic dimensions become 1), for warm-up."""
    import numpy as np

    shape = tuple(d if d >= 0 else 1 for d in spec.shape)
    return np.zeros(shape, dtype=KSERVE_TO_NUMPY[spec.datatype])


def warm_up(model: LoadedModel) -> dict[str, np.ndarray]:
    """One inference on zeros: proves the model runs before it serves anyone."""
    return model.infer({spec.name: zeros_for(spec) for spec in model.inputs})
