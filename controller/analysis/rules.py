"""Per node: would the TensorRT ONNX parser of a given version take it, and if not, why.

Two layers: the operator table (is the op known and supported by that version's parser), then
the restrictions that can be checked without running anything: inputs that must be weights
(axes, CumSum's axis, TopK's K before 8.6, Dropout's training_mode), attribute values (Resize
modes, pooling rank, TopK ``sorted``), DequantizeLinear's input type, and the 10.1 data types.
Where the importer refuses with a message of its own, the reason quotes it (TensorRT's words, as
the agent's fallback reason will show them).

Each input restriction was checked against onnx-tensorrt's importer at the release tag of every
version in the table (``builtin_op_importers.cpp`` at ``release/8.5-GA``/``release/8.6-GA``,
``onnxOpImporters.cpp`` at ``release/10.1-GA``; the unit tests name file and tag per
restriction). "Weights" is what those importers call ``is_weights()``: initializers and Constant
outputs (:func:`controller.analysis.fold.parser_weights`). Conv and ConvTranspose take weights and
bias computed at run time in all three ("dynamic weights convolution", ``convMultiInput``), so
they have no such restriction.

What the agent changes before it builds is not a refusal: a DequantizeLinear of a constant INT32
tensor (ONNX Runtime's quantized biases) is folded into an FP32 initializer, so it is supported
with a :attr:`NodeSupport.note`; so are data-dependent output shapes (NonZero,
NonMaxSuppression), which need the IOutputAllocator of TensorRT 8.5 and later. Nodes inside
subgraphs and functions are walked by :mod:`controller.analysis.support`. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from controller.analysis.fold import parser_weights
from controller.analysis.graph import Graph, Node, TensorInfo
from controller.analysis.ops_table import OpsTable

ReasonKind = Literal["custom_op", "unknown_op", "unsupported_op", "restriction", "data_type"]

RESIZE_COORDINATE_MODES = frozenset(
    {"half_pixel", "pytorch_half_pixel", "tf_half_pixel_for_nn", "asymmetric", "align_corners"}
)
RESIZE_MODES = frozenset({"nearest", "linear"})
RESIZE_NEAREST_MODES = frozenset({"floor", "ceil", "round_prefer_floor", "round_prefer_ceil"})
TOPK_MAX_K = 3840

DATA_DEPENDENT_OPS = frozenset({"NonZero", "NonMaxSuppression"})
"""Operators whose output shape depends on the input values: an engine needs an
IOutputAllocator (NVIDIA TensorRT ``include/NvInferRuntime.h``: from release/8.5)."""

DEQUANTIZE_TYPES: Mapping[str, frozenset[str]] = {
    "8.5": frozenset({"INT8"}),
    "8.6": frozenset({"INT8"}),
    "10.1": frozenset({"INT8", "FP8", "INT4"}),
}
"""Input types of IDequantizeLayer per version (onnx-tensorrt ``docs/operators.md``)."""

IMPORTER_TYPES_10_1: Mapping[str, frozenset[str]] = {
    "NonZero": frozenset({"FP32", "FP16", "BF16", "INT32", "INT64", "INT8", "BOOL"}),
}
"""Where the 10.1 importer takes more input types than its ``docs/operators.md`` lists (the
NonZero importer's own check; the docs say FP32, FP16)."""

FOLDED_DEQUANTIZE_TYPES = frozenset({"INT32"})
"""DequantizeLinear inputs the agent folds into FP32 initializers when every input is constant."""


@dataclass(frozen=True)
class NodeSupport:
    """Whether one node goes to TensorRT; ``reason`` says why not, for a person.

    ``note``: supported, with something worth saying (the agent folds it before the build, the
    engine needs an output allocator, TensorRT may still refuse what could not be checked).
    """

    index: int
    supported: bool
    reason: str | None = None
    kind: ReasonKind | None = None
    note: str | None = None


@dataclass(frozen=True)
class Scope:
    """What a node's checks see: its graph, the weights, the uses, and the scopes around it
    (a subgraph's nodes see the names of the graphs that hold it: outer weights stay weights)."""

    graph: Graph
    weights: frozenset[str]
    """What the parser's importers take as weights (initializers, Constant outputs)."""
    used: frozenset[str]
    trt_version: str
    outer: Scope | None = None

    def is_weights(self, name: str) -> bool:
        return name in self.weights or (self.outer is not None and self.outer.is_weights(name))

    def value(self, name: str) -> tuple[int, ...] | None:
        found = self.graph.constant_values.get(name)
        if found is None and self.outer is not None:
            return self.outer.value(name)
        return found

    def tensor(self, name: str) -> TensorInfo | None:
        found = self.graph.tensor(name)
        if found is None and self.outer is not None:
            return self.outer.tensor(name)
        return found


def scope_of(graph: Graph, trt_version: str, outer: Scope | None = None) -> Scope:
    """The scope of ``graph``'s nodes; ``outer``: the scope of the node holding ``graph``."""
    used = {name for node in graph.nodes for name in node.inputs} | set(graph.outputs)
    return Scope(graph, parser_weights(graph), frozenset(used), trt_version, outer)


def check_node(node: Node, ctx: Scope, table: OpsTable) -> NodeSupport:
    """One node on its own (its subgraphs and the functions it calls are not looked into)."""
    trt_version = ctx.trt_version
    if not node.is_default_domain:
        return NodeSupport(
            node.index,
            False,
            f"custom operator {node.domain}::{node.op_type}: no TensorRT parser support "
            "without a plugin",
            "custom_op",
        )
    entry = table.get(node.op_type)
    if entry is None or not entry.listed.get(trt_version, False):
        newer = entry.first_supported() if entry else None
        hint = f" (supported from TensorRT {newer})" if newer else ""
        return NodeSupport(
            node.index,
            False,
            f"{node.op_type} is not known to the TensorRT {trt_version} ONNX parser{hint}",
            "unknown_op",
        )
    if not entry.supported_in(trt_version):
        newer = entry.first_supported()
        hint = f" (supported from TensorRT {newer})" if newer else ""
        return NodeSupport(
            node.index,
            False,
            f"{node.op_type} is not supported by the TensorRT {trt_version} ONNX parser{hint}",
            "unsupported_op",
        )
    if node.op_type == "DequantizeLinear":
        dequantize = _dequantize(node, ctx)
        if dequantize is not None:
            return dequantize
    check = _CHECKS.get(node.op_type)
    failure = check(node, ctx) if check else None
    if failure is not None:
        return NodeSupport(node.index, False, f"{node.op_type}: {failure}", "restriction")
    types = IMPORTER_TYPES_10_1.get(node.op_type, entry.types)
    if trt_version == "10.1" and types and node.inputs:
        tensor = ctx.tensor(node.inputs[0])
        if (
            tensor is not None
            and not tensor.dtype.startswith("ONNX:")
            and tensor.dtype not in types
        ):
            allowed = ", ".join(sorted(types))
            return NodeSupport(
                node.index,
                False,
                f"{node.op_type}: input type {tensor.dtype} is not one of {allowed}",
                "data_type",
            )
    if node.op_type in DATA_DEPENDENT_OPS:
        return NodeSupport(
            node.index,
            True,
            note=f"{node.op_type} has a data-dependent output shape: the engine needs an "
            "IOutputAllocator (TensorRT 8.5 and later), which the agent gives it",
        )
    return NodeSupport(node.index, True)


def _shape_input(position: int) -> Callable[[Node, Scope], str | None]:
    """A model input read as a shape (Reshape's shape, Expand's, ConstantOfShape's, Tile's
    repeats) is a TensorRT *shape input*: its optimisation profile needs its values
    (``IOptimizationProfile.set_shape_input``), which a delegate config cannot give (its profiles
    hold shapes). Real 8.5.2 and 8.6.0 refused such a model at build: "optimization profile is
    missing values for shape input"."""

    def check(node: Node, ctx: Scope) -> str | None:
        name = node.input(position)
        if name is None or name not in ctx.graph.inputs or name in ctx.graph.initializers:
            return None
        return (
            f'"{name}: optimization profile is missing values for shape input" (the model '
            f"input {name} is read as a shape; delegate configs give shapes, not values)"
        )

    return check


def _zero_point(node: Node, ctx: Scope) -> str | None:
    """Q/DQ zero points that are weights must be all zeros: ``shiftIsAllZeros`` in the
    QuantizeLinear/DequantizeLinear importer (``builtin_op_importers.cpp`` at release/8.5-GA and
    8.6-GA, ``onnxOpImporters.cpp`` at 10.1-GA). ONNX Runtime's quantizer writes non-zero ones
    unless asked for symmetric quantization (real 8.5.2 refused such a model so)."""
    point = node.input(2)
    if point is None or not ctx.is_weights(point):
        return None
    values = ctx.value(point)
    if values is None or not any(values):
        return None
    return (
        '"TensorRT only supports symmetric quantization. The zero point for the '
        'QuantizeLinear/DequantizeLinear operator must be all zeros." (zero point '
        f"{point} is not: quantize with symmetric activations and weights)"
    )


def _dequantize(node: Node, ctx: Scope) -> NodeSupport | None:
    """DequantizeLinear's input ``x``: refused, folded by the agent, or None (checks go on)."""
    x = node.input(0)
    info = ctx.tensor(x) if x else None
    if x is None or info is None or info.dtype.startswith("ONNX:"):
        return None
    if info.dtype == "UINT8":
        return NodeSupport(
            node.index,
            False,
            'DequantizeLinear: "Found invalid input type of UINT8"',
            "restriction",
        )
    if info.dtype in DEQUANTIZE_TYPES.get(ctx.trt_version, frozenset()):
        return None
    words = '"DequantizeLinear: only activation types allowed as input to this layer"'
    constant = all(ctx.is_weights(name) for name in node.inputs if name)
    if info.dtype in FOLDED_DEQUANTIZE_TYPES and constant:
        return NodeSupport(
            node.index,
            True,
            note=f"DequantizeLinear of the constant {info.dtype} tensor {x} is folded into an "
            f"FP32 initializer by the agent before the build (as it is, TensorRT "
            f"{ctx.trt_version} refuses it: {words})",
        )
    folded = " (the agent folds it only when x, scale and zero point are all initializers)"
    return NodeSupport(
        node.index,
        False,
        f"{words}: input x ({x}) is {info.dtype}"
        + (folded if info.dtype in FOLDED_DEQUANTIZE_TYPES else ""),
        "restriction",
    )


# --- static restriction checks: each returns None (fine) or what is wrong ----------------------

_PAD_AXES = "TensorRT does not support dynamic axes for pad!"
_REDUCE_AXES = "Axis input must be an initializer!"


def _must_be_weights(position: int, what: str, says: str) -> Callable[[Node, Scope], str | None]:
    """Input ``position`` must be weights; ``says``: the importer's own words when it is not."""

    def check(node: Node, ctx: Scope) -> str | None:
        name = node.input(position)
        if name is None or ctx.is_weights(name):
            return None
        return (
            f"`{what}` ({name}) must be an initializer or a Constant; the TensorRT "
            f'{ctx.trt_version} parser does not take a computed tensor here: "{says}"'
        )

    return check


def _pad(node: Node, ctx: Scope) -> str | None:
    axes = node.input(3)
    if axes is not None and ctx.trt_version in ("8.5", "8.6"):
        return (
            f"an `axes` input ({axes}) is unsupported before TensorRT 10 (pad every axis): "
            f'"{_PAD_AXES}"'
        )
    return _must_be_weights(3, "axes", _PAD_AXES)(node, ctx)


def _resize(node: Node, ctx: Scope) -> str | None:
    coordinate = node.attr("coordinate_transformation_mode", "half_pixel")
    mode = node.attr("mode", "nearest")
    nearest = node.attr("nearest_mode", "round_prefer_floor")
    if coordinate not in RESIZE_COORDINATE_MODES:
        return f"coordinate_transformation_mode {coordinate!r} is unsupported"
    if mode not in RESIZE_MODES:
        return f"mode {mode!r} is unsupported (only nearest, linear)"
    if mode == "nearest" and nearest not in RESIZE_NEAREST_MODES:
        return f"nearest_mode {nearest!r} is unsupported"
    if node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        return "keep_aspect_ratio_policy must be 'stretch'"
    if node.attr("antialias", 0):
        return "antialiasing is unsupported"
    return None


def _pooling(node: Node, ctx: Scope) -> str | None:
    kernel = node.attr("kernel_shape")
    if node.op_type != "LpPool" and isinstance(kernel, tuple) and len(kernel) not in (2, 3):
        return f"{len(kernel)}D pooling is unsupported (2D or 3D pooling only)"
    dilations = node.attr("dilations")
    if isinstance(dilations, tuple) and any(d != 1 for d in dilations):
        return "dilations must be empty or all ones"
    if node.op_type == "MaxPool" and len(node.outputs) > 1 and node.outputs[1] in ctx.used:
        return "the Indices output is unsupported"
    return None


def _topk(node: Node, ctx: Scope) -> str | None:
    if node.attr("sorted", 1) != 1:
        return "`sorted` must be 1"
    k_name = node.input(1)
    if k_name is None:
        return None
    if not ctx.is_weights(k_name):
        if ctx.trt_version == "8.5":
            return f"`K` ({k_name}) must be an initializer in TensorRT 8.5 (computed K from 8.6)"
        return None
    k = ctx.value(k_name)
    if k and k[0] >= TOPK_MAX_K:
        return f"K={k[0]} must be less than {TOPK_MAX_K}"
    return None


def _constant(node: Node, ctx: Scope) -> str | None:
    bad = sorted({"sparse_value", "value_string", "value_strings"} & set(node.attributes))
    return f"attribute {bad[0]} is unsupported" if bad else None


def _scatter_nd(node: Node, ctx: Scope) -> str | None:
    reduction = node.attr("reduction", "none")
    return None if reduction == "none" else f"reduction {reduction!r} is unsupported"


def _layer_norm(node: Node, ctx: Scope) -> str | None:
    extra = [name for name in node.outputs[1:] if name and name in ctx.used]
    return f"only the first output is supported ({extra[0]} is used)" if extra else None


def _lstm(node: Node, ctx: Scope) -> str | None:
    if node.attr("input_forget", 0) != 0:
        return "`input_forget` must be 0"
    if node.attr("layout", 0) != 0:
        return "`layout` must be 0"
    return None


def _dropout(node: Node, ctx: Scope) -> str | None:
    training = node.input(2)
    if training is None:
        return None
    if not ctx.is_weights(training):
        return "`training_mode` must be an initializer that is False"
    value = ctx.value(training)
    return "`training_mode` must be False" if value and value[0] else None


_AXES_INPUT = 1
_CHECKS: Mapping[str, Callable[[Node, Scope], str | None]] = {
    "Resize": _resize,
    "MaxPool": _pooling,
    "AveragePool": _pooling,
    "LpPool": _pooling,
    "TopK": _topk,
    "Slice": _must_be_weights(3, "axes", "This version of TensorRT does not support dynamic axes."),
    "Squeeze": _must_be_weights(_AXES_INPUT, "axes", "Squeeze axes input must be an initializer!"),
    "Unsqueeze": _must_be_weights(
        _AXES_INPUT, "axes", "Axes input for unsqueeze operation should be a constant tensor."
    ),
    "Pad": _pad,
    "CumSum": _must_be_weights(1, "axis", "Axis input for CumSum must be an initializer!"),
    "Constant": _constant,
    "QuantizeLinear": _zero_point,
    "Reshape": _shape_input(1),
    "Expand": _shape_input(1),
    "ConstantOfShape": _shape_input(0),
    "Tile": _shape_input(1),
    "DequantizeLinear": _zero_point,
    "ScatterND": _scatter_nd,
    "LayerNormalization": _layer_norm,
    "LSTM": _lstm,
    "Dropout": _dropout,
    **{
        op: _must_be_weights(_AXES_INPUT, "axes", _REDUCE_AXES)
        for op in (
            "ReduceL1",
            "ReduceL2",
            "ReduceLogSum",
            "ReduceLogSumExp",
            "ReduceMax",
            "ReduceMean",
            "ReduceMin",
            "ReduceProd",
            "ReduceSum",
            "ReduceSumSquare",
        )
    },
}
