"""The initializers of an ONNX model as numpy arrays, read without the ``onnx`` package.

The host may import only the standard library, numpy and tensorrt, and JetPack 5's Python 3.8
has no ``onnx``; refit on TensorRT 8.x needs the new weights by name (``Refitter.
set_named_weights``, the ONNX parser names refittable weights after the initializers). An ONNX
file is a protobuf ``ModelProto``; this reads just ``graph`` (field 7) → ``initializer`` (field 5)
→ ``TensorProto`` (dims 1, data_type 2, float_data 4, int32_data 5, int64_data 7, name 8,
raw_data 9, double_data 10, data_location 14) from the wire format. Pure.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Tuple

import numpy as np

from .protobuf_wire import VARINT, WireError, fields, varint

# onnx.TensorProto.DataType → numpy
_NUMPY = {
    1: "<f4",
    2: "u1",
    3: "i1",
    4: "<u2",
    5: "<i2",
    6: "<i4",
    7: "<i8",
    9: "?",
    10: "<f2",
    11: "<f8",
    12: "<u4",
    13: "<u8",
}


class OnnxWeightsError(ValueError):
    """The bytes are not an ONNX model this reader understands; the message says why."""


def _fields(data: bytes) -> Iterator[Tuple[int, int, object]]:
    """(field number, wire type, value) of one message: ints for varints, bytes otherwise."""
    try:
        for number, wire, _, payload, end in fields(data):
            yield number, wire, (varint(data, payload)[0] if wire == VARINT else data[payload:end])
    except WireError as exc:
        raise OnnxWeightsError(str(exc)) from exc


def _packed_varints(data: bytes) -> List[int]:
    values, pos = [], 0
    while pos < len(data):
        value, pos = varint(data, pos)
        values.append(value)
    return values


def _signed(value: int, bits: int = 64) -> int:
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _tensor(data: bytes) -> Tuple[str, np.ndarray]:
    dims: List[int] = []
    dtype_code, name, raw = 0, "", b""
    floats: List[bytes] = []
    ints: List[int] = []
    doubles: List[bytes] = []
    for number, wire, value in _fields(data):
        if number == 1:
            dims.extend(_packed_varints(value) if wire == 2 else [value])  # type: ignore[arg-type,list-item]
        elif number == 2:
            dtype_code = int(value)  # type: ignore[call-overload]
        elif number == 4:
            floats.append(value)  # type: ignore[arg-type]
        elif number in (5, 7):
            ints.extend(_packed_varints(value) if wire == 2 else [value])  # type: ignore[arg-type,list-item]
        elif number == 8:
            name = bytes(value).decode()  # type: ignore[call-overload]
        elif number == 9:
            raw = bytes(value)  # type: ignore[call-overload]
        elif number == 10:
            doubles.append(value)  # type: ignore[arg-type]
        elif number == 14 and value == 1:
            raise OnnxWeightsError(
                "initializer %r is stored outside the file (external data)" % name
            )
    if dtype_code not in _NUMPY:
        raise OnnxWeightsError(
            "initializer %r has ONNX type %d, which refit cannot read" % (name, dtype_code)
        )
    dtype = np.dtype(_NUMPY[dtype_code])
    shape = tuple(_signed(d) for d in dims)
    if raw:
        array = np.frombuffer(raw, dtype=dtype)
    elif floats:
        array = np.frombuffer(b"".join(floats), dtype="<f4")
    elif doubles:
        array = np.frombuffer(b"".join(doubles), dtype="<f8")
    elif dtype_code == 10:
        array = np.array(ints, dtype="<u2").view("<f2")
    else:
        array = np.array([_signed(v) for v in ints], dtype=dtype)
    # np.dtype(name) is numpy's own dtype object for the type: TensorRT 8.x's Weights(array)
    # matches dtypes by identity (utils.cpp: type.is(py::dtype("f4"))), so a byte-order copy of
    # the dtype ("=" from "<") is refused as "Could not implicitly convert NumPy data type".
    return name, array.astype(np.dtype(dtype.name), copy=True).reshape(shape)


def initializers(model: bytes) -> Dict[str, np.ndarray]:
    """Every initializer of ``model`` (serialized ModelProto) by name."""
    found: Dict[str, np.ndarray] = {}
    graphs = [value for number, wire, value in _fields(model) if number == 7 and wire == 2]
    if not graphs:
        raise OnnxWeightsError("not an ONNX model: no graph")
    for graph in graphs:
        for number, wire, value in _fields(graph):  # type: ignore[arg-type]
            if number == 5 and wire == 2:
                name, array = _tensor(value)  # type: ignore[arg-type]
                found[name] = array
    return found
