"""FLOPs estimates for the operators that carry a CNN's compute, and support rates.

Convolutions and matrix products are usually over 90 % of a vision model's compute, so only
Conv, ConvTranspose, Gemm and MatMul are counted (one multiply-add = 2 FLOPs; bias ignored).
Shapes are the graph's: for a model with dynamic input dims, the sizes at the stated input shapes
(:attr:`~controller.analysis.graph.Graph.assumed`), which the report names; an estimate that
depends on such a shape, or on a dim still unknown (counted as 1), is marked inexact. Never
negative: a dim a model declares as -1 is unknown, not a size. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.analysis.graph import Graph, Node

COUNTED_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})


@dataclass(frozen=True)
class FlopEstimate:
    """FLOPs of one node; ``exact`` False when an unknown dim was counted as 1 or a dynamic dim
    was taken at the assumed input shape."""

    flops: int
    exact: bool


def _dims(graph: Graph, name: str | None) -> tuple[list[int], bool] | None:
    if name is None:
        return None
    info = graph.tensor(name)
    if info is None or info.shape is None:
        return None
    dims = [1 if d is None or d < 0 else d for d in info.shape]
    return dims, not info.dynamic and all(d is not None and d >= 0 for d in info.shape)


def node_flops(graph: Graph, node: Node) -> FlopEstimate | None:
    """FLOPs of ``node``: 0 for ops not counted, None when the shapes it needs are unknown."""
    if node.op_type not in COUNTED_OPS or not node.is_default_domain:
        return FlopEstimate(0, True)
    if node.op_type == "Conv":
        out, weight = _dims(graph, node.outputs[0]), _dims(graph, node.input(1))
        if out is None or weight is None or len(weight[0]) < 2:
            return None
        per_output = weight[0][1] * math.prod(weight[0][2:])
        return FlopEstimate(2 * math.prod(out[0]) * per_output, out[1] and weight[1])
    if node.op_type == "ConvTranspose":
        x, weight = _dims(graph, node.input(0)), _dims(graph, node.input(1))
        if x is None or weight is None or len(weight[0]) < 2:
            return None
        per_input = weight[0][1] * math.prod(weight[0][2:])
        return FlopEstimate(2 * math.prod(x[0]) * per_input, x[1] and weight[1])
    if node.op_type == "Gemm":
        a, out = _dims(graph, node.input(0)), _dims(graph, node.outputs[0])
        if a is None or out is None or len(a[0]) != 2:
            return None
        k = a[0][0] if node.attr("transA", 0) else a[0][1]
        return FlopEstimate(2 * math.prod(out[0]) * k, a[1] and out[1])
    a, out = _dims(graph, node.input(0)), _dims(graph, node.outputs[0])
    if a is None or out is None or not a[0]:
        return None
    return FlopEstimate(2 * math.prod(out[0]) * a[0][-1], a[1] and out[1])


@dataclass(frozen=True)
class SupportRates:
    """How much of the model the GPU path takes, by node count and by estimated FLOPs."""

    nodes_total: int
    nodes_supported: int
    flops_total: int
    flops_supported: int
    flops_exact: bool
    unknown_flop_nodes: int
    """Counted ops whose shapes are unknown (their FLOPs are missing from both totals)."""

    @property
    def node_share(self) -> float | None:
        return self.nodes_supported / self.nodes_total if self.nodes_total else None

    @property
    def flop_share(self) -> float | None:
        return self.flops_supported / self.flops_total if self.flops_total else None


def support_rates(
    estimates: Mapping[int, FlopEstimate | None],
    supported: Mapping[int, bool],
    counted_nodes: Iterable[int],
) -> SupportRates:
    """Rates over ``counted_nodes`` (node indices; folded constants excluded by the caller)."""
    nodes = list(counted_nodes)
    total = supported_flops = unknown = 0
    exact = True
    for index in nodes:
        estimate = estimates.get(index)
        if estimate is None:
            unknown += 1
            continue
        total += estimate.flops
        exact = exact and estimate.exact
        if supported.get(index, False):
            supported_flops += estimate.flops
    return SupportRates(
        nodes_total=len(nodes),
        nodes_supported=sum(1 for i in nodes if supported.get(i, False)),
        flops_total=total,
        flops_supported=supported_flops,
        flops_exact=exact and unknown == 0,
        unknown_flop_nodes=unknown,
    )
