"""Adapter for ``onnx``: an ONNX model as the analyzer's own plain, frozen dataclasses.

The only module of :mod:`controller.analysis` that imports ``onnx``. It loads the bytes, runs ONNX
shape inference (so every tensor has a dtype and, where it can be known, a shape) and keeps what
the pure analysis needs: nodes in graph order, tensor infos, initializer names, Constant outputs
and the values of small integer and boolean constants (axes, K, If conditions, ...).

Nested graphs: a node's GRAPH attributes (``If`` then/else_branch, ``Loop``/``Scan``
body) become :attr:`Node.subgraphs`, converted the same way (their own nodes, tensors, inferred
shapes), and the model-local functions become :attr:`Graph.functions`, bodies as graphs. The
names of the inputs' symbolic dims are kept (:attr:`Graph.dim_params`).

Sizes at a stated shape: a model whose inputs have dynamic dims (``batch``, ``-1``,
``?``) has no size to count FLOPs or bytes at, so the graph is inferred a second time with every
input at a concrete shape (:mod:`controller.analysis.shapes` chooses it: the config's profile
``opt``, else a named default) and :attr:`Graph.assumed` says which. Tensors whose size follows
from such an assumption are marked ``dynamic``; a dim a model declares negative (``-1``, as some
exporters write for "unknown") is unknown, never a negative size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from controller.analysis.shapes import AssumedShapes, stated_shapes
from controller.errors import InvalidModel

AttrValue = int | float | str | tuple[int, ...] | tuple[float, ...] | tuple[str, ...] | None
"""An attribute as Python: scalars, tuples of scalars; tensors and subgraphs become ``None``."""

SMALL_CONSTANT = 64
"""Integer and boolean constants up to this many elements keep their values (axes, K, pads, If
conditions, ...)."""

DTYPE_NAMES: dict[int, tuple[str, int | None]] = {
    onnx.TensorProto.FLOAT: ("FP32", 4),
    onnx.TensorProto.FLOAT16: ("FP16", 2),
    onnx.TensorProto.BFLOAT16: ("BF16", 2),
    onnx.TensorProto.DOUBLE: ("FP64", 8),
    onnx.TensorProto.INT64: ("INT64", 8),
    onnx.TensorProto.INT32: ("INT32", 4),
    onnx.TensorProto.INT16: ("INT16", 2),
    onnx.TensorProto.INT8: ("INT8", 1),
    onnx.TensorProto.UINT64: ("UINT64", 8),
    onnx.TensorProto.UINT32: ("UINT32", 4),
    onnx.TensorProto.UINT16: ("UINT16", 2),
    onnx.TensorProto.UINT8: ("UINT8", 1),
    onnx.TensorProto.BOOL: ("BOOL", 1),
    onnx.TensorProto.STRING: ("STRING", None),
    onnx.TensorProto.FLOAT8E4M3FN: ("FP8", 1),
    onnx.TensorProto.FLOAT8E5M2: ("FP8", 1),
    onnx.TensorProto.INT4: ("INT4", None),
    onnx.TensorProto.UINT4: ("UINT4", None),
}
"""ONNX element type → (name as the TensorRT table writes it, bytes per element or None)."""

DEFAULT_DOMAINS = frozenset({"", "ai.onnx"})


@dataclass(frozen=True)
class TensorInfo:
    """A value's type: ``shape`` is None when even the rank is unknown; a dim is None if unknown.

    ``dynamic``: the model leaves a dim (or the rank) of this tensor open and ``shape`` holds its
    size at the assumed input shapes (:attr:`Graph.assumed`).
    """

    name: str
    dtype: str
    itemsize: int | None
    shape: tuple[int | None, ...] | None
    dynamic: bool = False


@dataclass(frozen=True)
class Node:
    """One node; ``index`` is its position in its graph's ``node`` list (TensorRT's id at the
    top level)."""

    index: int
    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: Mapping[str, AttrValue] = field(default_factory=dict)
    subgraphs: tuple[tuple[str, Graph], ...] = ()
    """GRAPH attributes by name (``then_branch``, ``else_branch``, ``body``), in proto order."""

    @property
    def is_default_domain(self) -> bool:
        return self.domain in DEFAULT_DOMAINS

    def input(self, position: int) -> str | None:
        """Name of input ``position``; None when absent or left empty (an omitted optional)."""
        if position < len(self.inputs) and self.inputs[position]:
            return self.inputs[position]
        return None

    def attr(self, name: str, default: AttrValue = None) -> AttrValue:
        return self.attributes.get(name, default)


@dataclass(frozen=True)
class Graph:
    """A model's main graph (or a subgraph, or a function body) after shape inference."""

    nodes: tuple[Node, ...]
    tensors: Mapping[str, TensorInfo]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    initializers: frozenset[str]
    constants: frozenset[str]
    """Outputs of ``Constant`` nodes."""
    constant_values: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Values of small integer and boolean initializers and Constant outputs (bools as 0/1)."""
    opset: int = 0
    producer: str = ""
    warnings: tuple[str, ...] = ()
    assumed: AssumedShapes | None = None
    """The input shapes sizes and FLOPs are counted at, when an input has dynamic dims."""
    functions: Mapping[tuple[str, str], Graph] = field(default_factory=dict)
    """Model-local functions by (domain, name), bodies as graphs (the model's graph only)."""
    dim_params: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Input name → the names of its symbolic dims, in order (``("batch", "?", "?")``)."""

    def tensor(self, name: str) -> TensorInfo | None:
        return self.tensors.get(name)


def load_graph(onnx_bytes: bytes, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """Parse ``onnx_bytes``, infer shapes and return the main graph as a :class:`Graph`.

    ``input_shapes`` (input name → dims, e.g. a config's shape profile ``opt``) fixes the dynamic
    dims of those inputs; the others get :mod:`controller.analysis.shapes`' defaults.
    """
    try:
        model = onnx.load_from_string(onnx_bytes)
    except Exception as exc:  # protobuf DecodeError and friends: all mean "not ONNX"
        raise InvalidModel(
            f"not a valid ONNX model (truncated or not ONNX: {exc}); give the complete .onnx file"
        ) from exc
    if not model.graph.node and not model.graph.output:
        raise InvalidModel("not a valid ONNX model: the file holds no graph; give an .onnx file")
    warnings: list[str] = []
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except (
        onnx.shape_inference.InferenceError,
        onnx.checker.ValidationError,
        ValueError,
        RuntimeError,
    ) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        warnings.append(f"ONNX shape inference failed ({first}); sizes and FLOPs are partial")
        inferred = model
    declared = _to_graph(inferred, warnings)
    assumed = stated_shapes(
        {name: t.shape for name in declared.inputs if (t := declared.tensor(name)) is not None},
        input_shapes or {},
    )
    if assumed is None:
        return declared
    sized = _infer_at(model, assumed.shapes)
    if sized is None:
        warnings.append(
            f"ONNX shape inference failed at {assumed.text()}; sizes with dynamic dims are "
            "counted as 1"
        )
        return dataclasses.replace(declared, warnings=tuple(warnings), assumed=assumed)
    at_shape = _to_graph(sized, warnings)
    return dataclasses.replace(
        _sized(declared, at_shape), warnings=tuple(warnings), assumed=assumed
    )


def _infer_at(
    model: onnx.ModelProto, shapes: Mapping[str, tuple[int, ...]]
) -> onnx.ModelProto | None:
    """``model`` shape-inferred with its inputs fixed at ``shapes``; None if inference fails."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for value in fixed.graph.input:
        dims = shapes.get(value.name)
        if dims is None or not value.type.HasField("tensor_type"):
            continue
        shape = value.type.tensor_type.shape
        shape.ClearField("dim")
        for d in dims:
            shape.dim.add().dim_value = d
    try:
        return onnx.shape_inference.infer_shapes(fixed, strict_mode=False, data_prop=True)
    except (
        onnx.shape_inference.InferenceError,
        onnx.checker.ValidationError,
        ValueError,
        RuntimeError,
    ):
        return None


def _sized(declared: Graph, at_shape: Graph) -> Graph:
    """``declared`` with the tensors (its subgraphs' too) as ``at_shape`` infers them, marked
    ``dynamic`` where the declared shape leaves a dim open."""
    tensors = {
        name: _mark(info, declared.tensors.get(name)) for name, info in at_shape.tensors.items()
    }
    nodes = tuple(
        dataclasses.replace(
            node,
            subgraphs=tuple(
                (key, _sized(sub, sized_sub))
                for (key, sub), (_, sized_sub) in zip(node.subgraphs, sized.subgraphs, strict=False)
            ),
        )
        if node.subgraphs
        else node
        for node, sized in zip(declared.nodes, at_shape.nodes, strict=False)
    )
    return dataclasses.replace(declared, tensors=tensors, nodes=nodes)


def _mark(info: TensorInfo, declared: TensorInfo | None) -> TensorInfo:
    known = declared is not None and declared.shape is not None
    if known and declared is not None and all(d is not None for d in declared.shape or ()):
        return info
    return dataclasses.replace(info, dynamic=True)


def _to_graph(model: onnx.ModelProto, warnings: list[str]) -> Graph:
    g = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS), 0)
    graph = _graph_of(g.node, [*g.input, *g.value_info, *g.output], g.initializer)
    initializers = graph.initializers
    return dataclasses.replace(
        graph,
        inputs=tuple(v.name for v in g.input if v.name not in initializers),
        outputs=tuple(v.name for v in g.output),
        opset=int(opset),
        producer=f"{model.producer_name} {model.producer_version}".strip(),
        warnings=tuple(warnings),
        functions={(f.domain, f.name): _function(f) for f in model.functions},
        dim_params={
            v.name: names
            for v in g.input
            if v.name not in initializers and (names := _dim_params(v))
        },
    )


def _graph_of(
    protos: Sequence[onnx.NodeProto],
    values: Sequence[onnx.ValueInfoProto],
    initializer: Sequence[onnx.TensorProto] = (),
) -> Graph:
    tensors: dict[str, TensorInfo] = {}
    for value_info in values:
        info = _value_info(value_info)
        if info is not None:
            tensors[value_info.name] = info
    initializers: set[str] = set()
    constant_values: dict[str, tuple[int, ...]] = {}
    for init in initializer:
        initializers.add(init.name)
        tensors.setdefault(init.name, _tensor_info(init))
        small = _small_ints(init)
        if small is not None:
            constant_values[init.name] = small
    nodes: list[Node] = []
    constants: set[str] = set()
    for index, proto in enumerate(protos):
        node = Node(
            index=index,
            name=proto.name or f"{proto.op_type}_{index}",
            op_type=proto.op_type,
            domain=proto.domain,
            inputs=tuple(proto.input),
            outputs=tuple(proto.output),
            attributes={a.name: _attr(a) for a in proto.attribute},
            subgraphs=tuple((a.name, _subgraph(a.g)) for a in proto.attribute if a.HasField("g")),
        )
        nodes.append(node)
        if proto.op_type == "Constant" and node.is_default_domain and proto.output:
            constants.add(proto.output[0])
            value = next((a for a in proto.attribute if a.name == "value"), None)
            if value is not None:
                tensors.setdefault(proto.output[0], _tensor_info(value.t, proto.output[0]))
                small = _small_ints(value.t)
                if small is not None:
                    constant_values[proto.output[0]] = small
    return Graph(
        nodes=tuple(nodes),
        tensors=tensors,
        inputs=(),
        outputs=(),
        initializers=frozenset(initializers),
        constants=frozenset(constants),
        constant_values=constant_values,
    )


def _subgraph(g: onnx.GraphProto) -> Graph:
    """An If branch or a Loop/Scan body: outer names stay unresolved here (support scopes them)."""
    graph = _graph_of(g.node, [*g.input, *g.value_info, *g.output], g.initializer)
    return dataclasses.replace(
        graph, inputs=tuple(v.name for v in g.input), outputs=tuple(v.name for v in g.output)
    )


def _function(function: onnx.FunctionProto) -> Graph:
    graph = _graph_of(function.node, list(function.value_info))
    return dataclasses.replace(graph, inputs=tuple(function.input), outputs=tuple(function.output))


def _dim_params(value: onnx.ValueInfoProto) -> tuple[str, ...]:
    if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
        return ()
    return tuple(d.dim_param for d in value.type.tensor_type.shape.dim if d.HasField("dim_param"))


def _dtype(elem_type: int) -> tuple[str, int | None]:
    return DTYPE_NAMES.get(elem_type, (f"ONNX:{elem_type}", None))


def _value_info(value: onnx.ValueInfoProto) -> TensorInfo | None:
    if not value.type.HasField("tensor_type"):
        return None
    tensor = value.type.tensor_type
    dtype, itemsize = _dtype(tensor.elem_type)
    shape: tuple[int | None, ...] | None = None
    if tensor.HasField("shape"):
        shape = tuple(
            int(d.dim_value) if d.HasField("dim_value") and d.dim_value >= 0 else None
            for d in tensor.shape.dim
        )
    return TensorInfo(name=value.name, dtype=dtype, itemsize=itemsize, shape=shape)


def _tensor_info(tensor: onnx.TensorProto, name: str | None = None) -> TensorInfo:
    dtype, itemsize = _dtype(tensor.data_type)
    return TensorInfo(
        name=name or tensor.name, dtype=dtype, itemsize=itemsize, shape=tuple(tensor.dims)
    )


def _small_ints(tensor: onnx.TensorProto) -> tuple[int, ...] | None:
    integer_types = {onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.BOOL}
    integer_types |= {onnx.TensorProto.INT8, onnx.TensorProto.UINT8}  # zero points
    if tensor.data_type not in integer_types or int(np.prod(tensor.dims)) > SMALL_CONSTANT:
        return None
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return None
    array = numpy_helper.to_array(tensor)
    return tuple(int(v) for v in array.reshape(-1))


def _attr(attribute: onnx.AttributeProto) -> AttrValue:
    kind = attribute.type
    if kind == onnx.AttributeProto.INT:
        return int(attribute.i)
    if kind == onnx.AttributeProto.FLOAT:
        return float(attribute.f)
    if kind == onnx.AttributeProto.STRING:
        return attribute.s.decode("utf-8", errors="replace")
    if kind == onnx.AttributeProto.INTS:
        return tuple(int(v) for v in attribute.ints)
    if kind == onnx.AttributeProto.FLOATS:
        return tuple(float(v) for v in attribute.floats)
    if kind == onnx.AttributeProto.STRINGS:
        return tuple(s.decode("utf-8", errors="replace") for s in attribute.strings)
    return None
