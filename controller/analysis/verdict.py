"""Is delegating this model to TensorRT worth it, and what to do about what stays on the CPU.

Rules of thumb from the field: the FLOPs share decides (convolutions and matrix products are where
the GPU pays); under ~80 % supported, fuse or replace operators first; every CPU↔GPU crossing
costs a copy and a synchronisation, so many partitions eat the gain. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from controller.analysis.flops import FlopEstimate, SupportRates
from controller.analysis.graph import Graph
from controller.analysis.support import NodeSupport

VerdictKind = Literal["full", "partial", "not_worth"]


@dataclass(frozen=True)
class Thresholds:
    """Where partial delegation stops paying."""

    min_share: float = 0.80
    """Least share of FLOPs (of nodes, when no op carries FLOPs) that must be supported."""
    max_partitions: int = 5
    """TFLite's MaxDelegatedPartitions tops out at 5; more engines mean more copies."""
    max_crossings: int = 8


@dataclass(frozen=True)
class UnsupportedOp:
    """One operator type that stays on the CPU: how often, how much compute, why, what to do."""

    op_type: str
    count: int
    flops: int
    reasons: tuple[str, ...]
    advice: str


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    line: str
    reasons: tuple[str, ...]
    top_unsupported: tuple[UnsupportedOp, ...]


_ADVICE: Mapping[str, str] = {
    "NonMaxSuppression": "run NMS on the CPU after the engine (cut the graph before it), or "
    "replace it with TensorRT's EfficientNMS_TRT plugin",
    "TopK": "make K a constant initializer (export with a fixed K) or do the top-k on the CPU "
    "after the engine",
    "NonZero": "avoid data-dependent shapes: use a mask (Where) instead, or post-process on "
    "the CPU",
    "Unique": "move it to post-processing on the CPU",
    "Resize": "export with a supported mode (nearest/linear, half_pixel or asymmetric, no "
    "antialias) or replace the upsampling with ConvTranspose",
    "Conv": "fold the weights into initializers (export with constant folding, or run "
    "`polygraphy surgeon sanitize --fold-constants` / onnx-simplifier)",
    "ConvTranspose": "fold the weights into initializers (constant folding at export)",
    "MaxPool": "reshape 1D pooling to 2D (N,C,1,W) and do not use the Indices output",
    "AveragePool": "reshape 1D pooling to 2D (N,C,1,W); use dilations of 1",
    "QLinearConv": "re-export in QDQ form (QuantizeLinear/DequantizeLinear around Conv) instead "
    "of QOperator form",
    "QLinearMatMul": "re-export in QDQ form instead of QOperator form",
    "MatMulInteger": "re-export in QDQ form instead of QOperator form",
    "ConvInteger": "re-export in QDQ form instead of QOperator form",
    "DeformConv": "replace the deformable convolution (e.g. plain Conv) or use a DCNv2 plugin",
    "Loop": "unroll the loop at export time or run it on the CPU",
    "If": "make both branches return tensors of one shape (pad or slice to a common size) from "
    "supported operators, or fix the condition at export (a constant condition imports one "
    "branch only)",
    "DequantizeLinear": "quantize activations and weights to INT8; an INT32 input (a bias) must "
    "be an initializer, with its scale and zero point, for the agent to fold it",
    "ImageDecoder": "decode images before the model (on the CPU or with NVJPEG)",
    "Einsum": "rewrite as MatMul/Transpose at export time",
    "LayerNormalization": "use TensorRT >= 8.6 or decompose into ReduceMean/Sub/Pow/Sqrt/Div",
}
_AXES_ADVICE = (
    "make the axes a constant initializer (constant-fold at export: `polygraphy surgeon "
    "sanitize --fold-constants` or onnx-simplifier)"
)
_KIND_ADVICE: Mapping[str, str] = {
    "custom_op": "replace it with standard ONNX ops or write a TensorRT plugin for it",
    "unknown_op": "replace it with supported ops, write a TensorRT plugin, or target a newer "
    "TensorRT (JetPack) that supports it",
    "unsupported_op": "replace it with supported ops or write a TensorRT plugin",
    "data_type": "cast the input to FP32/FP16 at export time",
}


def advice_for(op_type: str, kind: str, reasons: Sequence[str]) -> str:
    """What a person can do about ``op_type`` staying on the CPU."""
    if kind == "restriction" and any("`axes`" in r or "`axis`" in r for r in reasons):
        return _AXES_ADVICE
    newer = next((r for r in reasons if "supported from TensorRT" in r), None)
    if newer is not None and op_type not in _ADVICE:
        version = newer.rsplit("TensorRT ", 1)[1].rstrip(")")
        return f"upgrade the device to TensorRT {version} or later, or replace it"
    if kind in {"custom_op", "data_type"}:
        return _KIND_ADVICE[kind]
    return _ADVICE.get(op_type) or _KIND_ADVICE.get(kind, _KIND_ADVICE["unsupported_op"])


def top_unsupported(
    graph: Graph,
    support: Sequence[NodeSupport],
    estimates: Mapping[int, FlopEstimate | None],
    limit: int = 5,
) -> tuple[UnsupportedOp, ...]:
    """Unsupported operator types, most FLOPs first, then most frequent."""
    by_op: dict[str, list[NodeSupport]] = {}
    for s in support:
        if not s.supported:
            by_op.setdefault(_label(graph, s.index), []).append(s)
    rows = []
    for op_type, items in by_op.items():
        reasons = tuple(dict.fromkeys(s.reason or "" for s in items))
        flops = sum((estimates.get(s.index) or FlopEstimate(0, True)).flops for s in items)
        kind = items[0].kind or "unsupported_op"
        bare = op_type.rsplit("::", 1)[-1]
        rows.append(
            UnsupportedOp(op_type, len(items), flops, reasons, advice_for(bare, kind, reasons))
        )
    rows.sort(key=lambda r: (-r.flops, -r.count, r.op_type))
    return tuple(rows[:limit])


def _label(graph: Graph, index: int) -> str:
    node = graph.nodes[index]
    return node.op_type if node.is_default_domain else f"{node.domain}::{node.op_type}"


def decide(
    rates: SupportRates,
    partitions: int,
    crossings: int,
    crossing_bytes: int,
    unsupported: tuple[UnsupportedOp, ...],
    thresholds: Thresholds | None = None,
    *,
    assumed: str | None = None,
) -> Verdict:
    """Full, partial or not worth delegating, with a one-line summary and the reasons.

    ``assumed``: the input shapes the FLOPs were counted at, when the model leaves dims dynamic;
    the line names them, since the share (and so the verdict) can depend on them.
    """
    limits = thresholds or Thresholds()
    share = rates.flop_share
    basis = "FLOPs"
    if share is None:
        share, basis = rates.node_share, "nodes"
    share = share or 0.0
    percent = f"{share * 100:.1f}% of {basis} on GPU"
    if assumed and basis == "FLOPs":
        percent += f" at {assumed}"
    if rates.nodes_total and rates.nodes_supported == rates.nodes_total:
        engines = f"{partitions} partition{'s' * (partitions != 1)}"
        return Verdict("full", f"full delegation: {engines}, {percent}", (), unsupported)
    reasons: list[str] = []
    if rates.nodes_supported == 0:
        reasons.append("no operator is supported")
    if share < limits.min_share:
        reasons.append(
            f"only {share * 100:.1f}% of {basis} supported (< {limits.min_share * 100:.0f}%): "
            "fuse or replace the unsupported operators first"
        )
    if partitions > limits.max_partitions:
        reasons.append(f"{partitions} partitions (> {limits.max_partitions})")
    if crossings > limits.max_crossings:
        reasons.append(f"{crossings} CPU/GPU crossings per inference (> {limits.max_crossings})")
    moved = human_bytes(crossing_bytes)
    summary = (
        f"{partitions} partition{'s' * (partitions != 1)}, {percent}, "
        f"{crossings} crossing{'s' * (crossings != 1)}, {moved} moved per inference"
    )
    if reasons:
        return Verdict("not_worth", f"not worth delegating: {summary}", tuple(reasons), unsupported)
    return Verdict("partial", f"partial delegation: {summary}", (), unsupported)


def human_bytes(count: int) -> str:
    """``1.5 MiB``-style sizes."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
