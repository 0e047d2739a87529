"""TensorRT data types ↔ numpy, by name, with a clear error for types the host cannot serve.

``trt.nptype`` raises a bare TypeError for BF16/FP8/INT4/FP4/E8M0 (numpy has no such dtype), so
this maps the ``DataType`` member's name instead and raises :class:`UnsupportedDType` naming the
tensor and the type. Pure apart from reading the enum value's name.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

NUMPY_BY_TRT: Dict[str, str] = {
    "FLOAT": "float32",
    "HALF": "float16",
    "INT8": "int8",
    "INT32": "int32",
    "INT64": "int64",
    "BOOL": "bool",
    "UINT8": "uint8",
}
NOT_SERVED = ("BF16", "FP8", "INT4", "FP4", "E8M0")


class UnsupportedDType(TypeError):
    """A tensor type numpy (and so the host's I/O) cannot represent."""


def type_name(trt_dtype: Any) -> str:
    """``trt.DataType.HALF`` → ``"HALF"`` (pybind enums have ``.name``; str is the fallback)."""
    name = getattr(trt_dtype, "name", None)
    if isinstance(name, str):
        return name
    return str(trt_dtype).rsplit(".", 1)[-1]


def to_numpy(trt_dtype: Any, tensor: str = "") -> np.dtype[Any]:
    """The numpy dtype of a TensorRT DataType; UnsupportedDType with the reason otherwise."""
    name = type_name(trt_dtype)
    numpy_name = NUMPY_BY_TRT.get(name)
    if numpy_name is None:
        where = " of tensor %r" % tensor if tensor else ""
        if name in NOT_SERVED:
            raise UnsupportedDType(
                "TensorRT type %s%s has no numpy equivalent, so the host cannot serve it: "
                "export the model with FLOAT or HALF inputs and outputs" % (name, where)
            )
        raise UnsupportedDType("unknown TensorRT type %s%s" % (name, where))
    return np.dtype(numpy_name)
