"""FLOPs of the compute-carrying operators, from inferred shapes (known answers by hand)."""

from __future__ import annotations

from onnx import helper

from controller.analysis.flops import FlopEstimate, node_flops, support_rates
from controller.analysis.graph import load_graph
from tests.analysis_models import fp32, make_model, weights


def flops_of(model: bytes) -> list[FlopEstimate | None]:
    graph = load_graph(model)
    return [node_flops(graph, n) for n in graph.nodes]


def test_conv_depthwise_conv_and_conv_transpose() -> None:
    model = make_model(
        [
            helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]),
            helper.make_node("Conv", ["a", "dw"], ["b"], pads=[1, 1, 1, 1], group=8),
            helper.make_node("ConvTranspose", ["b", "up"], ["c"], strides=[2, 2]),
            helper.make_node("Relu", ["c"], ["y"]),
        ],
        [fp32("x", [1, 3, 32, 32])],
        [fp32("y", None)],
        [weights("w", [8, 3, 3, 3]), weights("dw", [8, 1, 3, 3]), weights("up", [8, 4, 2, 2])],
    )
    conv, depthwise, transpose, relu = flops_of(model)
    assert conv == FlopEstimate(2 * (8 * 32 * 32) * (3 * 9), True)
    assert depthwise == FlopEstimate(2 * (8 * 32 * 32) * 9, True)
    assert transpose == FlopEstimate(2 * (8 * 32 * 32) * (4 * 4), True)
    assert relu == FlopEstimate(0, True)


def test_gemm_and_batched_matmul() -> None:
    model = make_model(
        [
            helper.make_node("Gemm", ["x", "w"], ["g"], transB=1),
            helper.make_node("MatMul", ["q", "k"], ["m"]),
        ],
        [fp32("x", [4, 16]), fp32("q", [2, 8, 5, 16]), fp32("k", [2, 8, 16, 7])],
        [fp32("g", None), fp32("m", None)],
        [weights("w", [10, 16])],
    )
    gemm, matmul = flops_of(model)
    assert gemm == FlopEstimate(2 * 4 * 10 * 16, True)
    assert matmul == FlopEstimate(2 * (2 * 8 * 5 * 7) * 16, True)


def test_unknown_batch_counts_as_one_and_marks_the_estimate() -> None:
    model = make_model(
        [helper.make_node("Gemm", ["x", "w"], ["g"], transB=1)],
        [fp32("x", ["batch", 16])],
        [fp32("g", None)],
        [weights("w", [10, 16])],
    )
    assert flops_of(model) == [FlopEstimate(2 * 10 * 16, False)]


def test_the_flop_share_weighs_compute_not_node_count() -> None:
    estimates = {0: FlopEstimate(900, True), 1: FlopEstimate(0, True), 2: FlopEstimate(100, True)}
    rates = support_rates(estimates, {0: True, 1: False, 2: False}, [0, 1, 2])
    assert rates.node_share is not None
    assert round(rates.node_share, 3) == 0.333
    assert rates.flop_share == 0.9
    unknown = support_rates({0: None, 1: FlopEstimate(10, True)}, {0: True, 1: True}, [0, 1])
    assert (unknown.unknown_flop_nodes, unknown.flops_total, unknown.flops_exact) == (1, 10, False)
