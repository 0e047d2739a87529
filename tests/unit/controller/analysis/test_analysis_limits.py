"""Analysis denial of service, the pure parts: the analysis grows linearly
with the graph, a model's nodes (subgraphs included) are counted against the controller's limit,
and the CLI says where an analysis stands."""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx import TensorProto, helper

from controller.analysis.onnx_inspect import inspect_model
from controller.analysis.partition import partition_dag
from controller.analysis.report import analyze_all
from controller.cli.models import analysis_lines
from controller.errors import TooManyNodes
from tests.analysis_models import fp32, identity_chain, make_model


def test_the_issue_19_probe_is_analysed_as_one_engine() -> None:
    # 30,000 Identity nodes took ~533 s (quadratic); the suite's 120 s timeout stops the old code.
    reports = analyze_all(identity_chain(30_000))

    assert sorted(reports) == ["10.1", "8.5", "8.6"]
    for report in reports.values():
        assert report["verdict"]["kind"] == "full"
        assert [len(p["nodes"]) for p in report["partitions"]] == [30_000]
        assert report["crossings"] == []


def test_a_long_chain_with_a_cpu_node_every_thousand_gives_one_engine_per_run() -> None:
    nodes = 20_000
    successors = [[i + 1] for i in range(nodes - 1)] + [[]]
    supported = [i % 1000 != 999 for i in range(nodes)]

    groups = partition_dag(successors, supported)

    assert groups == [list(range(start, start + 999)) for start in range(0, nodes, 1000)]


def test_a_wide_fan_out_through_the_cpu_keeps_the_source_apart() -> None:
    # source → cpu_i → branch_i → sink for 2,000 branches: every branch joins the sink's engine,
    # the source cannot (each path from it leaves through the CPU and comes back).
    branches = 2000
    source, sink = 0, 2 * branches + 1
    successors: list[list[int]] = [[] for _ in range(sink + 1)]
    supported = [True] * (sink + 1)
    for i in range(branches):
        cpu, branch = 1 + i, 1 + branches + i
        successors[source].append(cpu)
        successors[cpu].append(branch)
        successors[branch].append(sink)
        supported[cpu] = False

    groups = partition_dag(successors, supported)

    assert groups == [list(range(branches + 1, sink + 1)), [source]]


def _model_with_an_if(tmp_path: Path) -> Path:
    """3 nodes in the main graph (Identity, If, Relu) and 2 in each branch of the If: 7."""
    then_branch = helper.make_graph(
        [
            helper.make_node("Identity", ["x"], ["a"]),
            helper.make_node("Neg", ["a"], ["then_out"]),
        ],
        "then",
        [],
        [fp32("then_out", [1, 4])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["b"]), helper.make_node("Abs", ["b"], ["else_out"])],
        "else",
        [],
        [fp32("else_out", [1, 4])],
    )
    path = tmp_path / "if.onnx"
    path.write_bytes(
        make_model(
            [
                helper.make_node("Identity", ["flag"], ["cond"]),
                helper.make_node(
                    "If", ["cond"], ["picked"], then_branch=then_branch, else_branch=else_branch
                ),
                helper.make_node("Relu", ["picked"], ["y"]),
            ],
            [fp32("x", [1, 4]), helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
            [fp32("y", [1, 4])],
        )
    )
    return path


def test_nodes_inside_subgraphs_count_against_the_limit(tmp_path: Path) -> None:
    path = _model_with_an_if(tmp_path)

    assert inspect_model(path, max_nodes=7).nodes == 7
    with pytest.raises(TooManyNodes) as refused:
        inspect_model(path, max_nodes=6)

    assert (refused.value.nodes, refused.value.limit) == (7, 6)
    assert str(refused.value).startswith(
        "the model has 7 nodes, more than this controller's limit of 6 (--max-model-nodes)"
    )
    assert "start `jetfleet serve` with a larger --max-model-nodes" in str(refused.value)


def test_nodes_inside_functions_count_against_the_limit(tmp_path: Path) -> None:
    """A function body of 500,000 Identity nodes passed a limit of 100,000 (ONNX
    Runtime inlines every call, so they are the model's nodes)."""
    body = [helper.make_node("Identity", ["a"], ["b0"])]
    body += [helper.make_node("Identity", [f"b{i}"], [f"b{i + 1}"]) for i in range(9)]
    body.append(helper.make_node("Identity", ["b9"], ["out"]))
    function = helper.make_function(
        "com.example", "Chain", ["a"], ["out"], body, [helper.make_opsetid("", 17)]
    )
    graph = helper.make_graph(
        [
            helper.make_node("Chain", ["x"], ["h"], domain="com.example"),
            helper.make_node("Relu", ["h"], ["y"]),
        ],
        "calls",
        [fp32("x", [1, 4])],
        [fp32("y", [1, 4])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    path = tmp_path / "function.onnx"
    path.write_bytes(
        helper.make_model(graph, opset_imports=opsets, functions=[function]).SerializeToString()
    )

    assert inspect_model(path, max_nodes=13).nodes == 13
    with pytest.raises(TooManyNodes) as refused:
        inspect_model(path, max_nodes=12)
    assert (refused.value.nodes, refused.value.limit) == (13, 12)


VERSION = {"name": "det", "version": "2", "delegation": {}}


def test_the_cli_says_where_the_analysis_stands() -> None:
    full = {"verdict": "full", "line": "full delegation: 1 partition", "flop_share": 1.0}

    assert analysis_lines({**VERSION, "analysis_state": "pending"}) == [
        "  analysis pending (the controller runs it after the push)"
    ]
    assert analysis_lines(
        {**VERSION, "analysis_state": "failed", "analysis_error": "it did not finish within 1 s"}
    ) == ["  analysis failed: it did not finish within 1 s"]
    assert analysis_lines({**VERSION, "analysis_state": "done", "delegation": {"10.1": full}}) == [
        "  trt 10.1 full delegation: 1 partition"
    ]
    refused = {**full, "tensorrt": "falls_back", "tensorrt_reason": "If_1: If: ... same shape"}
    assert analysis_lines({**VERSION, "delegation": {"8.6": refused}}) == [
        "  trt 8.6  full delegation: 1 partition",
        "           tensorrt: falls back to ONNX Runtime: If_1: If: ... same shape",
    ]
