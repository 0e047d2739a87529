"""Verdicts and advice: full, partial, or not worth delegating."""

from __future__ import annotations

from controller.analysis.flops import SupportRates
from controller.analysis.verdict import Thresholds, advice_for, decide


def rates(nodes: int, supported: int, flops: int, supported_flops: int) -> SupportRates:
    return SupportRates(nodes, supported, flops, supported_flops, True, 0)


def test_everything_supported_is_full_delegation() -> None:
    verdict = decide(rates(10, 10, 1000, 1000), 1, 0, 0, ())
    assert verdict.kind == "full"
    assert verdict.line.startswith("full delegation: 1 partition, 100.0% of FLOPs")


def test_partial_names_partitions_share_crossings_and_bytes() -> None:
    verdict = decide(rates(10, 9, 1000, 970), 2, 2, 3 * 1024 * 1024, ())
    assert verdict.kind == "partial"
    assert verdict.line == (
        "partial delegation: 2 partitions, 97.0% of FLOPs on GPU, 2 crossings, "
        "3.0 MiB moved per inference"
    )


def test_under_80_percent_of_flops_is_not_worth_it_even_with_most_nodes_supported() -> None:
    verdict = decide(rates(100, 99, 1000, 700), 2, 2, 1024, ())
    assert verdict.kind == "not_worth"
    assert any("70.0% of FLOPs" in r for r in verdict.reasons)


def test_too_many_crossings_is_not_worth_it() -> None:
    verdict = decide(rates(100, 90, 1000, 990), 4, 12, 1024, (), Thresholds(max_crossings=8))
    assert verdict.kind == "not_worth"
    assert any("12 CPU/GPU crossings" in r for r in verdict.reasons)


def test_without_compute_ops_the_node_share_decides() -> None:
    verdict = decide(rates(4, 3, 0, 0), 1, 2, 64, ())
    assert "75.0% of nodes" in verdict.line
    assert verdict.kind == "not_worth"


def test_advice_is_specific_to_the_operator_and_the_reason() -> None:
    assert "EfficientNMS" in advice_for("NonMaxSuppression", "unsupported_op", ())
    assert "plugin" in advice_for("FancyOp", "custom_op", ())
    assert "constant" in advice_for("Unsqueeze", "restriction", ("Unsqueeze: `axes` (a) must be",))
    assert "TensorRT 10.1" in advice_for(
        "Hardmax",
        "unsupported_op",
        ("Hardmax is not supported ... (supported from TensorRT 10.1)",),
    )
