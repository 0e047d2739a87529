"""Adapter for ``onnx``: is a file a valid ONNX model, and what tensors does it take and give.

Its inputs are what ONNX Runtime calls inputs, for every IR version: graph inputs that no
(dense or sparse) initializer backs.

Also whether the graph is explicitly quantized (QuantizeLinear/DequantizeLinear nodes): such a
model builds in INT8 without a calibration cache, which :func:`shared.delegate.check_config`
needs to know.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import onnx

from controller.analysis import onnx_walk
from controller.analysis.external_data import ARCHIVE_HINT, external_locations
from controller.errors import InvalidModel, TooManyNodes
from controller.records import TensorInfo

_KSERVE_DATATYPES: dict[int, str] = {
    onnx.TensorProto.FLOAT: "FP32",
    onnx.TensorProto.FLOAT16: "FP16",
    onnx.TensorProto.BFLOAT16: "BF16",
    onnx.TensorProto.DOUBLE: "FP64",
    onnx.TensorProto.INT64: "INT64",
    onnx.TensorProto.INT32: "INT32",
    onnx.TensorProto.INT16: "INT16",
    onnx.TensorProto.INT8: "INT8",
    onnx.TensorProto.UINT64: "UINT64",
    onnx.TensorProto.UINT32: "UINT32",
    onnx.TensorProto.UINT16: "UINT16",
    onnx.TensorProto.UINT8: "UINT8",
    onnx.TensorProto.BOOL: "BOOL",
    onnx.TensorProto.STRING: "BYTES",
}


QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})


@dataclass(frozen=True)
class ModelSignature:
    """What the controller records about an uploaded model."""

    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    has_qdq: bool
    nodes: int = 0
    """Nodes of the graph, of its subgraphs (If/Loop/Scan bodies) and of its functions."""


def inspect_model(path: Path, max_nodes: int | None = None) -> ModelSignature:
    """Check that ``path`` holds a valid ONNX model; return its inputs, outputs and Q/DQ flag.

    A model with more than ``max_nodes`` nodes is refused with :class:`TooManyNodes` before
    anything else looks at its graph.
    """
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf DecodeError, OSError, ...: all mean "not ONNX"
        raise InvalidModel(
            f"not a valid ONNX model (truncated or not ONNX: {exc}); upload the complete .onnx file"
        ) from exc
    nodes = count_nodes(model)
    if max_nodes is not None and nodes > max_nodes:
        raise TooManyNodes(nodes, max_nodes)
    external = external_locations(model)
    if external:
        raise InvalidModel(
            "the model keeps its weights in files beside the .onnx "
            f"({', '.join(external[:5])}{', ...' if len(external) > 5 else ''}): {ARCHIVE_HINT}"
        )
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, ValueError, RuntimeError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidModel(f"invalid ONNX model: {first_line}") from exc
    if not model.graph.output:
        raise InvalidModel("invalid ONNX model: the graph has no outputs")
    initializers = _initializers(model.graph)
    inputs = [_spec(v) for v in model.graph.input if v.name not in initializers]
    outputs = [_spec(v) for v in model.graph.output]
    has_qdq = any(node.op_type in QDQ_OPS for _, node in onnx_walk.nodes(model))
    return ModelSignature(inputs, outputs, has_qdq, nodes)


def _initializers(graph: onnx.GraphProto) -> set[str]:
    """Names of the graph's dense and sparse initializers: listed in ``graph.input`` (as every
    IR-3 model lists them), they are still not inputs, as ONNX Runtime counts them."""
    return {t.name for t in graph.initializer} | {s.values.name for s in graph.sparse_initializer}


def count_nodes(model: onnx.ModelProto) -> int:
    """Nodes of ``model``: of its graph, its subgraphs and its functions' bodies."""
    return sum(1 for _ in onnx_walk.nodes(model))


def _spec(value: onnx.ValueInfoProto) -> TensorInfo:
    tensor = value.type.tensor_type
    shape: list[int | str] = []
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value"):
            shape.append(int(dim.dim_value))
        else:
            shape.append(dim.dim_param or "?")
    datatype = _KSERVE_DATATYPES.get(tensor.elem_type, f"ONNX:{tensor.elem_type}")
    return TensorInfo(name=value.name, datatype=datatype, shape=tuple(shape))
