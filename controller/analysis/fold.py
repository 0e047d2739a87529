"""What TensorRT treats as constant: the parser's weights, and what the builder folds away.

Two different things, both checked against onnx-tensorrt's importers at the release tags the
operator table covers (``builtin_op_importers.cpp`` at ``release/8.5-GA`` and ``release/8.6-GA``,
``onnxOpImporters.cpp`` at ``release/10.1-GA``):

- **Parser weights** (:func:`parser_weights`): what an importer sees as ``is_weights()`` while it
  parses, the only thing that satisfies "must be an initializer" restrictions (Squeeze axes,
  CumSum axis, Reduce axes, ...). Initializers (also those an IR-3 model repeats in
  ``graph.input``) and ``Constant`` outputs, nothing else: no importer of these releases turns the
  output of Cast, Reshape, ConstantOfShape... of weights back into weights (they return tensors,
  and a ``ShapeTensor`` built from a tensor has no known values).
- **Build-time constants** (:func:`build_time_constants`): tensors computable before any input
  arrives: parser weights, ``Shape``/``Size`` of a tensor whose dims the model fixes, and the
  outputs of deterministic operators (:data:`FOLDABLE_OPS`) whose inputs are all build-time
  constants (ConstantOfShape of a constant shape, Cast/Reshape/Unsqueeze/Concat/Gather/Slice of
  constants, arithmetic on constants, ...). TensorRT's builder folds these layers: they never run
  per inference, so they make no engine boundary, no CPU↔GPU copy and no work to count. An IR-3
  model converted from Caffe2 computes every Conv weight with ConstantOfShape from a ``__SHAPE``
  initializer; folded, it is an ordinary CNN.

Pure: works on :class:`~controller.analysis.graph.Graph` only.
"""

from __future__ import annotations

from controller.analysis.graph import Graph, Node

FOLDABLE_OPS = frozenset(
    {"Identity", "Cast", "CastLike", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten"}
    | {"Concat", "Split", "Gather", "GatherElements", "GatherND", "Slice", "Expand", "Tile"}
    | {"ConstantOfShape", "Range", "EyeLike", "DequantizeLinear", "QuantizeLinear"}
    | {"Add", "Sub", "Mul", "Div", "Mod", "Pow", "Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log"}
    | {"Floor", "Ceil", "Round", "Sign", "Min", "Max", "Sum", "Mean", "Clip", "Relu"}
    | {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor"}
    | {"Where", "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean"}
)
"""Deterministic operators whose outputs are constant when all their inputs are (no Random*, no
control flow: a Loop or If with constant inputs is not folded here)."""

SHAPE_OPS = frozenset({"Shape", "Size"})
"""Constant when their input's dims are all fixed by the model (whatever its values)."""


def parser_weights(graph: Graph) -> frozenset[str]:
    """Initializers and Constant outputs: what TensorRT's ONNX importers accept as weights."""
    return frozenset(graph.initializers | graph.constants)


def build_time_constants(graph: Graph) -> frozenset[str]:
    """Every tensor TensorRT's builder can compute before inference (module docstring)."""
    constant = set(parser_weights(graph))
    for node in graph.nodes:
        if _folds(node, constant, graph):
            constant.update(name for name in node.outputs if name)
    return frozenset(constant)


def _folds(node: Node, constant: set[str], graph: Graph) -> bool:
    if not node.is_default_domain:
        return False
    present = [name for name in node.inputs if name]
    if node.op_type in SHAPE_OPS:
        info = graph.tensor(present[0]) if present else None
        return (
            info is not None
            and not info.dynamic
            and info.shape is not None
            and all(d is not None for d in info.shape)
        )
    return node.op_type in FOLDABLE_OPS and bool(present) and all(n in constant for n in present)
