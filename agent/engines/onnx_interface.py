"""Give a saved ONNX model back the inputs of the model it was optimised from (pure, no onnx).

Why: a model of IR version 3 (opset 9 exports converted from Caffe2 and the like) must list every
initializer in ``graph.input``. When ONNX Runtime's optimiser folds such an initializer away
(Conv+BatchNormalization fusion consumes the ``..._SHAPE`` tensors a ConstantOfShape read), the
saved optimised model keeps its ``graph.input`` entry without the initializer behind it, so the
tensor becomes a *required input* of the engine that no client and no reference has. ONNX
Runtime lists only the data input(s) for the original model.

:func:`keep_inputs` rewrites ``graph.input`` of a serialized model to the entries named in
``inputs`` (what ONNX Runtime calls the original model's inputs) plus those backed by an
initializer of the saved graph (still not inputs to ONNX Runtime, whatever the IR version). The
agent carries no ``onnx`` package, so this reads and writes the protobuf wire format itself: only
the top-level ``ModelProto.graph`` and the names of ``GraphProto`` inputs and initializers are
parsed; every other byte is copied unchanged.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

from agent.trt_host.protobuf_wire import LEN, WireError, encode_varint, fields

__all__ = ["WireError", "initializer_names", "interface", "keep_inputs"]

_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_GRAPH_INPUT = 11
_GRAPH_OUTPUT = 12
_GRAPH_SPARSE_INITIALIZER = 15
_TENSOR_NAME = 8
_SPARSE_VALUES = 1
_VALUE_INFO_NAME = 1


def _fields(data: memoryview) -> Iterator[tuple[int, int, int, int]]:
    """``(field number, start, payload start, end)`` of each field (see protobuf_wire)."""
    for number, _, start, payload, end in fields(data):
        yield number, start, payload, end


def _string(data: memoryview, field: int) -> str | None:
    """The first length-delimited ``field`` of a message, as UTF-8 text."""
    for number, _, payload, end in _fields(data):
        if number == field:
            return bytes(data[payload:end]).decode("utf-8", "replace")
    return None


def _message(data: memoryview, field: int) -> memoryview | None:
    for number, _, payload, end in _fields(data):
        if number == field:
            return data[payload:end]
    return None


def initializer_names(graph: memoryview) -> set[str]:
    """Names of the graph's dense and sparse initializers."""
    names: set[str] = set()
    for number, _, payload, end in _fields(graph):
        if number == _GRAPH_INITIALIZER:
            name = _string(graph[payload:end], _TENSOR_NAME)
        elif number == _GRAPH_SPARSE_INITIALIZER:
            values = _message(graph[payload:end], _SPARSE_VALUES)
            name = None if values is None else _string(values, _TENSOR_NAME)
        else:
            continue
        if name:
            names.add(name)
    return names


def interface(model: bytes) -> tuple[list[str], list[str]]:
    """``(inputs, outputs)`` of a serialized ModelProto as ONNX Runtime counts them: graph
    inputs without an initializer behind them, and graph outputs; names in order."""
    graph = _message(memoryview(model), _MODEL_GRAPH)
    if graph is None:
        raise WireError("the model has no graph")
    initializers = initializer_names(graph)
    inputs, outputs = [], []
    for number, _, payload, end in _fields(graph):
        if number in (_GRAPH_INPUT, _GRAPH_OUTPUT):
            name = _string(graph[payload:end], _VALUE_INFO_NAME) or ""
            if number == _GRAPH_OUTPUT:
                outputs.append(name)
            elif name not in initializers:
                inputs.append(name)
    return inputs, outputs


def keep_inputs(model: bytes, inputs: Collection[str]) -> tuple[bytes, list[str]]:
    """``model`` with ``graph.input`` cut to ``inputs`` and initializer-backed entries, and the
    names of the entries dropped (empty list, and the same bytes, when nothing is dropped)."""
    data = memoryview(model)
    located = [(s, p, e) for n, s, p, e in _fields(data) if n == _MODEL_GRAPH]
    if len(located) != 1:
        raise WireError("the model has no graph, or more than one")
    start, payload, end = located[0]
    graph = data[payload:end]
    keep = set(inputs) | initializer_names(graph)
    pieces: list[memoryview] = []
    dropped: list[str] = []
    for number, field_start, field_payload, field_end in _fields(graph):
        if number == _GRAPH_INPUT:
            name = _string(graph[field_payload:field_end], _VALUE_INFO_NAME) or ""
            if name not in keep:
                dropped.append(name)
                continue
        pieces.append(graph[field_start:field_end])
    if not dropped:
        return model, []
    body = b"".join(pieces)
    tag = encode_varint(_MODEL_GRAPH << 3 | LEN)
    rebuilt = b"".join((data[:start], tag, encode_varint(len(body)), body, data[end:]))
    return rebuilt, dropped
