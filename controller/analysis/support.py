"""Per node: would the TensorRT ONNX parser of a given version take it, and if not, why.

Two layers: the operator table (is the op known and supported by that version's parser), then
the restrictions that can be checked without running anything: inputs that must be weights
(axes, CumSum's axis, TopK's K before 8.6, Dropout's training_mode), attribute values (Resize
modes, pooling rank, TopK ``sorted``), and the 10.1 data types.

Each input restriction was checked against onnx-tensorrt's importer at the release tag of every
version in the table (``builtin_op_importers.cpp`` at ``release/8.5-GA``/``release/8.6-GA``,
``onnxOpImporters.cpp`` at ``release/10.1-GA``; the unit tests name file and tag per
restriction). "Weights" is what those importers call ``is_weights()``: initializers and Constant
outputs (:func:`controller.analysis.fold.parser_weights`). Conv and ConvTranspose take weights and
bias computed at run time in all three ("dynamic weights convolution", ``convMultiInput``), so
they have no such restriction. Pure: works on :class:`~controller.analysis.graph.Graph` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from controller.analysis.fold import build_time_constants, parser_weights
from controller.analysis.graph import Graph, Node
from controller.analysis.ops_table import OpsTable

ReasonKind = Literal["custom_op", "unknown_op", "unsupported_op", "restriction", "data_type"]

RESIZE_COORDINATE_MODES = frozenset(
    {"half_pixel", "pytorch_half_pixel", "tf_half_pixel_for_nn", "asymmetric", "align_corners"}
)
RESIZE_MODES = frozenset({"nearest", "linear"})
RESIZE_NEAREST_MODES = frozenset({"floor", "ceil", "round_prefer_floor", "round_prefer_ceil"})
TOPK_MAX_K = 3840


@dataclass(frozen=True)
class NodeSupport:
    """Whether one node goes to TensorRT; ``reason`` says why not, for a person."""

    index: int
    supported: bool
    reason: str | None = None
    kind: ReasonKind | None = None


def static_tensors(graph: Graph) -> frozenset[str]:
    """Tensors known before inference (folded by TensorRT's builder): see :mod:`.fold`."""
    return build_time_constants(graph)


def node_support(graph: Graph, table: OpsTable, trt_version: str) -> list[NodeSupport]:
    """One :class:`NodeSupport` per node of ``graph``, in graph order."""
    used = {name for node in graph.nodes for name in node.inputs} | set(graph.outputs)
    context = _Context(
        graph=graph, weights=parser_weights(graph), used=frozenset(used), trt_version=trt_version
    )
    return [_one(node, context, table, trt_version) for node in graph.nodes]


@dataclass(frozen=True)
class _Context:
    graph: Graph
    weights: frozenset[str]
    """What the parser's importers take as weights (initializers, Constant outputs)."""
    used: frozenset[str]
    trt_version: str

    def is_weights(self, name: str) -> bool:
        return name in self.weights

    def value(self, name: str) -> tuple[int, ...] | None:
        return self.graph.constant_values.get(name)


def _one(node: Node, ctx: _Context, table: OpsTable, trt_version: str) -> NodeSupport:
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
    check = _CHECKS.get(node.op_type)
    failure = check(node, ctx) if check else None
    if failure is not None:
        return NodeSupport(node.index, False, f"{node.op_type}: {failure}", "restriction")
    if trt_version == "10.1" and entry.types and node.inputs:
        tensor = ctx.graph.tensor(node.inputs[0])
        if (
            tensor is not None
            and not tensor.dtype.startswith("ONNX:")
            and tensor.dtype not in entry.types
        ):
            allowed = ", ".join(sorted(entry.types))
            return NodeSupport(
                node.index,
                False,
                f"{node.op_type}: input type {tensor.dtype} is not one of {allowed}",
                "data_type",
            )
    return NodeSupport(node.index, True)


# --- static restriction checks: each returns None (fine) or what is wrong ----------------------


def _must_be_weights(position: int, what: str) -> Callable[[Node, _Context], str | None]:
    def check(node: Node, ctx: _Context) -> str | None:
        name = node.input(position)
        if name is None or ctx.is_weights(name):
            return None
        return (
            f"`{what}` ({name}) must be an initializer or a Constant; the TensorRT "
            f"{ctx.trt_version} parser does not take a computed tensor here"
        )

    return check


def _pad(node: Node, ctx: _Context) -> str | None:
    axes = node.input(3)
    if axes is not None and ctx.trt_version in ("8.5", "8.6"):
        return f"an `axes` input ({axes}) is unsupported before TensorRT 10 (pad every axis)"
    return _must_be_weights(3, "axes")(node, ctx)


def _resize(node: Node, ctx: _Context) -> str | None:
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


def _pooling(node: Node, ctx: _Context) -> str | None:
    kernel = node.attr("kernel_shape")
    if node.op_type != "LpPool" and isinstance(kernel, tuple) and len(kernel) not in (2, 3):
        return f"{len(kernel)}D pooling is unsupported (2D or 3D pooling only)"
    dilations = node.attr("dilations")
    if isinstance(dilations, tuple) and any(d != 1 for d in dilations):
        return "dilations must be empty or all ones"
    if node.op_type == "MaxPool" and len(node.outputs) > 1 and node.outputs[1] in ctx.used:
        return "the Indices output is unsupported"
    return None


def _topk(node: Node, ctx: _Context) -> str | None:
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


def _constant(node: Node, ctx: _Context) -> str | None:
    bad = sorted({"sparse_value", "value_string", "value_strings"} & set(node.attributes))
    return f"attribute {bad[0]} is unsupported" if bad else None


def _scatter_nd(node: Node, ctx: _Context) -> str | None:
    reduction = node.attr("reduction", "none")
    return None if reduction == "none" else f"reduction {reduction!r} is unsupported"


def _layer_norm(node: Node, ctx: _Context) -> str | None:
    extra = [name for name in node.outputs[1:] if name and name in ctx.used]
    return f"only the first output is supported ({extra[0]} is used)" if extra else None


def _lstm(node: Node, ctx: _Context) -> str | None:
    if node.attr("input_forget", 0) != 0:
        return "`input_forget` must be 0"
    if node.attr("layout", 0) != 0:
        return "`layout` must be 0"
    return None


def _dropout(node: Node, ctx: _Context) -> str | None:
    training = node.input(2)
    if training is None:
        return None
    if not ctx.is_weights(training):
        return "`training_mode` must be an initializer that is False"
    value = ctx.value(training)
    return "`training_mode` must be False" if value and value[0] else None


_AXES_INPUT = 1
_CHECKS: Mapping[str, Callable[[Node, _Context], str | None]] = {
    "Resize": _resize,
    "MaxPool": _pooling,
    "AveragePool": _pooling,
    "LpPool": _pooling,
    "TopK": _topk,
    "Slice": _must_be_weights(3, "axes"),
    "Squeeze": _must_be_weights(_AXES_INPUT, "axes"),
    "Unsqueeze": _must_be_weights(_AXES_INPUT, "axes"),
    "Pad": _pad,
    "CumSum": _must_be_weights(1, "axis"),
    "Constant": _constant,
    "ScatterND": _scatter_nd,
    "LayerNormalization": _layer_norm,
    "LSTM": _lstm,
    "Dropout": _dropout,
    **{
        op: _must_be_weights(_AXES_INPUT, "axes")
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
