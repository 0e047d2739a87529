"""Fold ``DequantizeLinear`` of constant integers into float initializers (pure, no onnx).

Why: ONNX Runtime's QDQ quantizer (``quantize_static(..., quant_format=QDQ)``) stores every bias
as an int32 initializer behind a ``DequantizeLinear`` node, and TensorRT 8.5/8.6's ONNX parser
refuses such a node: "DequantizeLinear: only activation types allowed as input to this layer".
:func:`fold_constant_dequantize` computes ``y = (x - x_zero_point) * x_scale`` in float32 for
every top-level ``DequantizeLinear`` whose ``x`` is an initializer of a folded type (default:
int32 only; ``axis`` honoured for per-channel 1-D scales, the zero point optional), stores ``y``
as a float32 initializer named after the node's output, and removes the node and the
initializers only it used. int8/uint8 weight ``DequantizeLinear`` nodes stay (TensorRT builds
INT8 from them) unless the caller names their types too, for a release that cannot take
per-channel int8 weights. ONNX Runtime computes the node the same way in float32, so the
rewritten model's outputs are those of the original (run without ORT's QDQ fusions).

Nodes are left as they are when they cannot be folded exactly: an input that is not an
initializer or is also a graph input (then it may be overridden), a scale that is not float32,
blocked quantization, unknown attributes, data stored outside the file, or an output that is a
graph output. The agent carries no ``onnx`` package: this reads and writes the protobuf wire
format (:mod:`agent.trt_host.protobuf_wire`) and copies every byte it does not change.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.trt_host.protobuf_wire import LEN, VARINT, WireError, encode_varint, fields, varint

if TYPE_CHECKING:  # numpy is imported where a model is folded: an idle agent never loads it
    import numpy as np

__all__ = ["FOLD_INT32", "GraphSpan", "WireError", "fold_constant_dequantize", "len_field"]

ONNX_FLOAT, ONNX_INT32 = 1, 6
FOLD_INT32 = frozenset({ONNX_INT32})
"""The default folded ``x`` types (onnx data_type codes): int32 biases only."""

_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_INPUT, _GRAPH_OUTPUT = 1, 5, 11, 12
_NODE_INPUT, _NODE_OUTPUT, _NODE_OP, _NODE_ATTRIBUTE, _NODE_DOMAIN = 1, 2, 4, 5, 7
_ATTR_NAME, _ATTR_I, _ATTR_G, _ATTR_GRAPHS = 1, 3, 6, 11
_TENSOR_DIMS, _TENSOR_TYPE, _TENSOR_NAME, _TENSOR_RAW, _TENSOR_LOCATION = 1, 2, 8, 9, 14
_VALUE_INFO_NAME = 1


def len_field(number: int, payload: bytes | memoryview) -> bytes:
    """One length-delimited field: key, length, payload."""
    return b"".join((encode_varint(number << 3 | LEN), encode_varint(len(payload)), payload))


@dataclass(frozen=True)
class GraphSpan:
    """Where ``ModelProto.graph`` lies in a serialized model, and its bytes."""

    model: memoryview
    start: int
    end: int
    body: memoryview

    @classmethod
    def of(cls, model: bytes) -> GraphSpan:
        data = memoryview(model)
        located = [(s, p, e) for n, w, s, p, e in fields(data) if n == _MODEL_GRAPH and w == LEN]
        if len(located) != 1:
            raise WireError("not an ONNX model: it has no graph, or more than one")
        start, payload, end = located[0]
        return cls(data, start, end, data[payload:end])

    def with_body(self, body: bytes) -> bytes:
        """The model with the graph replaced by ``body``; every other byte unchanged."""
        return b"".join(
            (self.model[: self.start], len_field(_MODEL_GRAPH, body), self.model[self.end :])
        )


def _strings(data: memoryview, number: int) -> list[bytes]:
    return [bytes(data[p:e]) for n, w, _, p, e in fields(data) if n == number and w == LEN]


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True)
class _Dequantize:
    inputs: list[bytes]
    output: bytes
    axis: int


def _dequantize_node(node: memoryview) -> _Dequantize | None:
    """The node if it is a standard ``DequantizeLinear`` this module can fold, else None."""
    if _strings(node, _NODE_OP)[-1:] != [b"DequantizeLinear"]:
        return None
    if _strings(node, _NODE_DOMAIN)[-1:] not in ([], [b""], [b"ai.onnx"]):
        return None
    inputs, outputs, axis = _strings(node, _NODE_INPUT), _strings(node, _NODE_OUTPUT), 1
    for attribute in (
        node[p:e] for n, w, _, p, e in fields(node) if n == _NODE_ATTRIBUTE and w == LEN
    ):
        name = _strings(attribute, _ATTR_NAME)
        ints = [
            varint(attribute, p)[0]
            for n, w, _, p, _ in fields(attribute)
            if n == _ATTR_I and w == VARINT
        ]
        if name == [b"axis"] and ints:
            axis = _signed(ints[-1])
        elif not (name == [b"block_size"] and ints in ([], [0])):
            return None  # blocked quantization or an attribute this reader does not know
    if len(outputs) != 1 or not 2 <= len(inputs) <= 3 or not inputs[0] or not inputs[1]:
        return None
    return _Dequantize([name for name in inputs if name], outputs[0], axis)


def _uses(graph: memoryview) -> Iterator[bytes]:
    """Every name the graph's nodes read, its subgraphs' included, and its outputs."""
    for number, wire, _, payload, end in fields(graph):
        if number == _GRAPH_NODE and wire == LEN:
            yield from _node_uses(graph[payload:end])
        elif number == _GRAPH_OUTPUT and wire == LEN:
            yield from _strings(graph[payload:end], _VALUE_INFO_NAME)


def _node_uses(node: memoryview) -> Iterator[bytes]:
    for number, wire, _, payload, end in fields(node):
        if number == _NODE_INPUT:
            yield bytes(node[payload:end])
        elif number == _NODE_ATTRIBUTE and wire == LEN:
            attribute = node[payload:end]
            for n, w, _, p, e in fields(attribute):
                if n in (_ATTR_G, _ATTR_GRAPHS) and w == LEN:
                    yield from _uses(attribute[p:e])  # outer-scope names a subgraph reads


def _data_type(tensor: memoryview) -> int:
    """The TensorProto's data_type; -1 (never folded) when its data lies outside the file."""
    code = 0
    for number, wire, _, payload, _ in fields(tensor):
        if number == _TENSOR_TYPE and wire == VARINT:
            code = varint(tensor, payload)[0]
        elif number == _TENSOR_LOCATION and wire == VARINT and varint(tensor, payload)[0] == 1:
            return -1
    return code


def _array(tensor: memoryview) -> np.ndarray | None:
    """The TensorProto as an array (onnx_weights' reader); None when it cannot be read."""
    from agent.trt_host.onnx_weights import initializers

    try:
        found = initializers(len_field(_MODEL_GRAPH, len_field(_GRAPH_INITIALIZER, tensor)))
    except ValueError:  # OnnxWeightsError (type it cannot read) or data that does not fit dims
        return None
    return next(iter(found.values()), None)


def _dequantized(
    x: np.ndarray, scale: np.ndarray, zero: np.ndarray | None, axis: int
) -> np.ndarray | None:
    """``(x - zero) * scale`` in float32 as ONNX Runtime computes it; None if not foldable."""
    import numpy as np

    if scale.dtype != np.float32 or scale.ndim > 1:
        return None
    if zero is not None and (zero.dtype != x.dtype or zero.ndim > 1 or zero.size != scale.size):
        return None
    if scale.size == 1:  # per tensor: a scalar, or a 1-element vector as ONNX Runtime takes it
        scale = scale.reshape(())
        zero = None if zero is None else zero.reshape(())
    else:  # per axis
        if not -x.ndim <= axis < x.ndim or x.shape[axis] != scale.size:
            return None
        shape = [1] * x.ndim
        shape[axis] = scale.size
        scale = scale.reshape(shape)
        zero = None if zero is None else zero.reshape(shape)
    shifted = x.astype(np.int64) - (0 if zero is None else zero.astype(np.int64))
    return (shifted.astype(np.float32) * scale.astype(np.float32)).astype(np.float32)


def _float_tensor(name: bytes, array: np.ndarray) -> bytes:
    """A float32 TensorProto: dims (packed), data_type, name, raw_data (little-endian)."""
    import numpy as np

    dims = b"".join(encode_varint(d) for d in array.shape)
    return b"".join(
        (
            len_field(_TENSOR_DIMS, dims) if array.ndim else b"",
            encode_varint(_TENSOR_TYPE << 3 | VARINT),
            encode_varint(ONNX_FLOAT),
            len_field(_TENSOR_NAME, name),
            len_field(_TENSOR_RAW, np.ascontiguousarray(array, dtype="<f4").tobytes()),
        )
    )


def fold_constant_dequantize(
    model: bytes, fold_types: Collection[int] = FOLD_INT32
) -> tuple[bytes, list[str]]:
    """``model`` (serialized ModelProto) with each top-level ``DequantizeLinear`` whose ``x`` is
    an initializer of an onnx data type in ``fold_types`` replaced by its float32 result, and
    the names of those results (the same bytes and ``[]`` when nothing is folded).

    WireError when the bytes are not a protobuf ONNX model."""
    try:
        return _fold(model, frozenset(fold_types))
    except WireError as exc:
        raise WireError(f"cannot fold DequantizeLinear in this ONNX model: {exc}") from exc


def _fold(model: bytes, fold_types: frozenset[int]) -> tuple[bytes, list[str]]:
    span = GraphSpan.of(model)
    graph = span.body
    tensors: dict[bytes, memoryview] = {}
    graph_inputs: set[bytes] = set()
    graph_outputs: set[bytes] = set()
    nodes: list[tuple[int, memoryview]] = []
    last_initializer = -1
    for number, wire, start, payload, end in fields(graph):
        if wire != LEN:
            continue
        if number == _GRAPH_INITIALIZER:
            last_initializer = start
            for name in _strings(graph[payload:end], _TENSOR_NAME)[-1:]:
                tensors[name] = graph[payload:end]
        elif number in (_GRAPH_INPUT, _GRAPH_OUTPUT):
            names = _strings(graph[payload:end], _VALUE_INFO_NAME)
            (graph_inputs if number == _GRAPH_INPUT else graph_outputs).update(names)
        elif number == _GRAPH_NODE:
            nodes.append((start, graph[payload:end]))

    folded: dict[int, bytes] = {}  # node start → the float initializer that replaces it
    consumed: set[bytes] = set()
    outputs: list[str] = []
    for start, node in nodes:
        dq = _dequantize_node(node)
        if dq is None or dq.output in graph_outputs:
            continue
        if any(name not in tensors or name in graph_inputs for name in dq.inputs):
            continue  # not constant: computed, or an input that may override the initializer
        if _data_type(tensors[dq.inputs[0]]) not in fold_types:
            continue
        arrays = [_array(tensors[name]) for name in dq.inputs]
        x, scale = arrays[0], arrays[1]
        zero = arrays[2] if len(arrays) == 3 else None
        if x is None or scale is None or (len(arrays) == 3 and zero is None):
            continue
        y = _dequantized(x, scale, zero, dq.axis)
        if y is None:
            continue
        folded[start] = _float_tensor(dq.output, y)
        consumed.update(dq.inputs)
        outputs.append(dq.output.decode("utf-8", "replace"))
    if not folded:
        return model, []

    still_used: set[bytes] = set()
    for number, wire, start, payload, end in fields(graph):
        if number == _GRAPH_NODE and wire == LEN and start not in folded:
            still_used.update(_node_uses(graph[payload:end]))
        elif number == _GRAPH_OUTPUT and wire == LEN:
            still_used.update(_strings(graph[payload:end], _VALUE_INFO_NAME))
    unused = consumed - still_used

    pieces: list[bytes | memoryview] = []
    for number, wire, start, payload, end in fields(graph):
        dropped = (number == _GRAPH_NODE and start in folded) or (
            number == _GRAPH_INITIALIZER
            and wire == LEN
            and bool(set(_strings(graph[payload:end], _TENSOR_NAME)[-1:]) & unused)
        )
        if not dropped:
            pieces.append(graph[start:end])
        if start == last_initializer:  # the new initializers follow the existing ones
            pieces.extend(len_field(_GRAPH_INITIALIZER, tensor) for tensor in folded.values())
    return span.with_body(b"".join(pieces)), outputs
