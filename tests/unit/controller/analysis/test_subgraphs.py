"""Nodes inside If branches, Loop bodies and model-local functions are checked as
the TensorRT ONNX parser imports them, and count against ``--max-model-nodes``.

Each rule names the onnx-tensorrt importer source and release tag it was checked against
(``git show release/X:builtin_op_importers.cpp`` / ``onnxOpImporters.cpp`` / ``ModelImporter.cpp``
/ ``ConditionalHelpers.cpp``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from controller.analysis.graph import load_graph
from controller.analysis.onnx_inspect import inspect_model
from controller.analysis.ops_table import load_ops_table
from controller.analysis.report import AnalysisReport, analyze
from controller.analysis.support import model_support
from controller.errors import TooManyNodes
from tests.analysis_models import fp32, ints, make_model

VERSIONS = ("8.5", "8.6", "10.1")
SAME_SHAPE = "IIfConditionalOutputLayer inputs must have the same shape."


def branch(name: str, length: int, op: str = "Identity") -> onnx.GraphProto:
    """``x[:, :length]`` of the outer ``x`` (starts/ends/axes: Constants of the branch), then
    ``op`` (a custom-domain op when ``op`` is ``FancyOp``)."""
    consts = [
        helper.make_node("Constant", [], [f"{name}_{k}"], value=numpy_helper.from_array(v))
        for k, v in (("s", np.array([0])), ("e", np.array([length])), ("a", np.array([1])))
    ]
    domain = "com.example" if op == "FancyOp" else ""
    nodes = [
        *consts,
        helper.make_node("Slice", ["x", f"{name}_s", f"{name}_e", f"{name}_a"], [f"{name}_c"]),
        helper.make_node(op, [f"{name}_c"], [f"{name}_out"], domain=domain),
    ]
    return helper.make_graph(nodes, name, [], [fp32(f"{name}_out", [1, length])])


def if_model(
    then_length: int, else_length: int, *, constant: bool = False, op: str = "Identity"
) -> bytes:
    """``If`` on ``flag`` (an input, or the constant True) between two slices of ``x`` [1, 8]."""
    cond = (
        helper.make_node("Constant", [], ["cond"], value=numpy_helper.from_array(np.array(True)))
        if constant
        else helper.make_node("Identity", ["flag"], ["cond"])
    )
    model = helper.make_model(
        helper.make_graph(
            [
                cond,
                helper.make_node(
                    "If",
                    ["cond"],
                    ["picked"],
                    then_branch=branch("then", then_length, op),
                    else_branch=branch("else", else_length),
                ),
                helper.make_node("Relu", ["picked"], ["y"]),
            ],
            "if",
            [fp32("x", [1, 8]), helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
            [fp32("y", None)],
        ),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
    )
    model.ir_version = 8
    return model.SerializeToString()


def test_an_if_whose_branches_return_different_shapes_falls_back() -> None:
    """onnx-tensorrt ``DEFINE_BUILTIN_OP_IMPORTER(If)`` in ``builtin_op_importers.cpp`` at
    release/8.5-GA and release/8.6-GA and in ``onnxOpImporters.cpp`` at release/10.1-GA: a
    condition that is not weights builds an IIfConditional, and ``addIfOutputLayers``
    (``ConditionalHelpers.cpp``, same tags) pairs each then/else output with
    ``conditional->addOutput(then, else)``. The shape check is TensorRT's own layer check
    ("IIfConditionalOutputLayer inputs must have the same shape", measured on TensorRT 8.6.0 with
    a voice activity detector; TensorRT's If operator page for 10.1: "the number of output
    tensors and their shapes for each of the subgraphs must be the same")."""
    model = if_model(4, 2)
    for version in VERSIONS:
        report = analyze(model, version, use_tensorrt=False)
        assert report.prediction is not None
        assert report.prediction.tensorrt == "falls_back", version
        assert report.prediction.line == "tensorrt: falls back to ONNX Runtime"
        (reason,) = report.prediction.reasons
        assert f'"{SAME_SHAPE} Shapes are [1,4] and [1,2]."' in reason
        assert reason.startswith("If_1: If: ")
        assert report.verdict.kind != "full"


def test_an_if_whose_branches_return_one_shape_builds() -> None:
    for version in VERSIONS:
        report = analyze(if_model(4, 4), version, use_tensorrt=False)
        assert report.prediction is not None
        assert report.prediction.tensorrt == "builds", (version, report.prediction.reasons)
        assert report.prediction.line == "tensorrt: builds"
        assert report.verdict.kind == "full"
        assert [n.path for n in report.subgraph_nodes][:5] == [
            "If_1/then_branch/Constant_0",
            "If_1/then_branch/Constant_1",
            "If_1/then_branch/Constant_2",
            "If_1/then_branch/Slice_3",
            "If_1/then_branch/Identity_4",
        ]
        assert {n.parent for n in report.subgraph_nodes} == {1}


def test_a_constant_condition_imports_the_selected_branch_only() -> None:
    """Same importers: ``if (cond.is_weights() && cond.weights().count() == 1)`` parses only the
    branch the value selects (``parseGraph(ctx, body)``), no IIfConditional, no shape check, and
    the other branch is never imported."""
    model = if_model(4, 2, constant=True)
    for version in VERSIONS:
        report = analyze(model, version, use_tensorrt=False)
        assert report.prediction is not None
        assert report.prediction.tensorrt == "builds", version
        assert "imports the then_branch only" in (report.nodes[1].note or "")
        assert all(n.path.startswith("If_1/then_branch/") for n in report.subgraph_nodes)


def test_branch_shapes_unknown_before_the_build_are_a_note_not_a_refusal() -> None:
    graph = helper.make_graph(
        [
            helper.make_node(
                "If",
                ["flag"],
                ["picked"],
                then_branch=helper.make_graph(
                    [helper.make_node("Relu", ["x"], ["t"])], "then", [], [fp32("t", None)]
                ),
                else_branch=helper.make_graph(
                    [helper.make_node("Abs", ["x"], ["e"])], "else", [], [fp32("e", None)]
                ),
            )
        ],
        "g",
        [fp32("x", ["n", 4]), helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
        [fp32("picked", None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    report = analyze(model.SerializeToString(), "8.6", use_tensorrt=False)
    assert report.prediction is not None
    assert report.prediction.tensorrt == "builds"
    assert "shapes are not known before the build" in (report.nodes[0].note or "")
    assert any(SAME_SHAPE in note for note in report.prediction.notes)


def test_an_unsupported_op_inside_an_if_branch_refuses_the_if() -> None:
    report = analyze(if_model(4, 4, op="FancyOp"), "8.6", use_tensorrt=False)
    assert report.verdict.kind != "full"
    assert not report.nodes[1].supported
    assert (report.nodes[1].reason or "").startswith(
        "If_1/then_branch/FancyOp_4: custom operator com.example::FancyOp"
    )
    inner = {n.path: n for n in report.subgraph_nodes}
    assert not inner["If_1/then_branch/FancyOp_4"].supported
    assert inner["If_1/else_branch/Identity_4"].supported
    assert report.prediction is not None
    assert report.prediction.reasons == [report.nodes[1].reason]


def test_a_loop_body_is_checked_and_sees_outer_initializers_as_weights() -> None:
    """onnx-tensorrt ``DEFINE_BUILTIN_OP_IMPORTER(Loop)`` (same files and tags): the body is
    imported with ``parseGraph``; outer tensors, initializers included, are in ``ctx->tensors()``,
    so an outer initializer is still ``is_weights()`` inside it."""

    def loop(op: str) -> bytes:
        body = helper.make_graph(
            [
                helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                helper.make_node("Unsqueeze", ["acc", "outer_axes"], ["u"]),
                helper.make_node("Squeeze", ["u", "outer_axes"], ["s"]),
                helper.make_node(op, ["s"], ["acc_out"]),
            ],
            "body",
            [
                helper.make_tensor_value_info("i", TensorProto.INT64, []),
                helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                fp32("acc", [4]),
            ],
            [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), fp32("acc_out", [4])],
        )
        return make_model(
            [helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)],
            [fp32("x", [4])],
            [fp32("y", [4])],
            [ints("trips", [3]), ints("outer_axes", [0])],
        )

    assert analyze(loop("Relu"), "8.6", use_tensorrt=False).verdict.kind == "full"
    refused = analyze(loop("Hardmax"), "8.6", use_tensorrt=False)
    assert not refused.nodes[0].supported
    assert (refused.nodes[0].reason or "").startswith("Loop_0/body/Hardmax_3: Hardmax")


def _function_model(body_op: str, body_nodes: int = 10) -> bytes:
    """``Chain`` (com.example): ``body_nodes`` Identity nodes then ``body_op``; the graph calls it
    twice, then Relu: 3 graph nodes and ``body_nodes + 1`` function nodes."""
    body = [helper.make_node("Identity", ["a"], ["b0"])]
    body += [helper.make_node("Identity", [f"b{i}"], [f"b{i + 1}"]) for i in range(body_nodes - 1)]
    body.append(helper.make_node(body_op, [f"b{body_nodes - 1}"], ["out"]))
    function = helper.make_function(
        "com.example", "Chain", ["a"], ["out"], body, [helper.make_opsetid("", 17)]
    )
    graph = helper.make_graph(
        [
            helper.make_node("Chain", ["x"], ["h"], domain="com.example"),
            helper.make_node("Chain", ["h"], ["h2"], domain="com.example"),
            helper.make_node("Relu", ["h2"], ["y"]),
        ],
        "calls",
        [fp32("x", [1, 4])],
        [fp32("y", [1, 4])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    return helper.make_model(graph, opset_imports=opsets, functions=[function]).SerializeToString()


def test_function_nodes_are_checked_once_and_count_against_the_node_limit(tmp_path: Path) -> None:
    """onnx-tensorrt ``ModelImporter.cpp`` at release/10.1-GA: ``parseNode`` dispatches a node
    whose type is a registered local function (``ctx->localFunctions().count(nodeType)``, filled
    from ``model.functions()``) to ``LocalFunctionImporter``, which imports the body node by node.
    At release/8.5-GA and release/8.6-GA there is no such branch: "No importer registered for op"
    → ``FallbackPluginImporter`` → "Plugin not found, are the plugin name, version, and namespace
    correct?"."""
    path = tmp_path / "function.onnx"
    path.write_bytes(_function_model("Relu"))
    assert inspect_model(path, max_nodes=14).nodes == 14  # 3 graph nodes + 11 function nodes
    with pytest.raises(TooManyNodes):
        inspect_model(path, max_nodes=13)

    good = analyze(path.read_bytes(), "10.1", use_tensorrt=False)
    assert good.prediction is not None
    assert good.prediction.tensorrt == "builds"
    paths = [n.path for n in good.subgraph_nodes]
    assert len(paths) == 11  # the body once, though called twice
    assert paths[-1] == "function com.example.Chain/Relu_10"
    assert {n.parent for n in good.subgraph_nodes} == {None}

    bad = analyze(_function_model("Hardmax", 3), "10.1", use_tensorrt=False)
    assert [n.supported for n in bad.nodes] == [True, True, True]  # Hardmax is 10.1's
    refused = analyze(_function_model("Unique", 3), "10.1", use_tensorrt=False)
    assert [n.supported for n in refused.nodes] == [False, False, True]
    assert (refused.nodes[0].reason or "").startswith(
        "function com.example.Chain/Unique_3: Unique is not supported"
    )

    for version in ("8.5", "8.6"):
        old = analyze(path.read_bytes(), version, use_tensorrt=False)
        assert old.prediction is not None
        assert old.prediction.tensorrt == "falls_back"
        assert "Plugin not found" in (old.nodes[0].reason or "")
        assert "supported from TensorRT 10.1" in (old.nodes[0].reason or "")


def test_a_function_calling_itself_is_refused_without_recursing_forever() -> None:
    function = helper.make_function(
        "com.example",
        "Loopy",
        ["a"],
        ["out"],
        [helper.make_node("Loopy", ["a"], ["out"], domain="com.example")],
        [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
    )
    graph = helper.make_graph(
        [helper.make_node("Loopy", ["x"], ["y"], domain="com.example")],
        "g",
        [fp32("x", [4])],
        [fp32("y", [4])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    model = helper.make_model(graph, opset_imports=opsets, functions=[function])
    support = model_support(load_graph(model.SerializeToString()), load_ops_table(), "10.1")
    assert not support.nodes[0].supported
    assert "calls itself" in (support.nodes[0].reason or "")


def test_a_report_stored_before_the_prediction_still_reads() -> None:
    stored = analyze(if_model(4, 4), "8.6", use_tensorrt=False).model_dump(mode="json")
    for key in ("prediction", "subgraph_nodes"):
        del stored[key]
    for node in stored["nodes"]:
        del node["note"]
    old = AnalysisReport.model_validate(stored)
    assert old.prediction is None
    assert old.subgraph_nodes == []


def test_calls_nested_deeper_than_24_are_refused_at_10_1() -> None:
    """onnx-tensorrt ``ModelImporter.cpp`` at release/10.1-GA, ``parseNode``: ``if
    (ctx->getNestedDepth() > kMAX_NESTED_SUBGRAPHS)`` (24) → "ONNX graph contains nested
    structures that exceed the maximum allowed by TensorRT!"; each function body or subgraph
    import adds a name scope."""

    def chain(levels: int) -> bytes:
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
        functions = [
            helper.make_function(
                "com.example",
                f"F{level}",
                ["a"],
                ["out"],
                [
                    helper.make_node(f"F{level + 1}", ["a"], ["out"], domain="com.example")
                    if level + 1 < levels
                    else helper.make_node("Relu", ["a"], ["out"])
                ],
                opsets,
            )
            for level in range(levels)
        ]
        graph = helper.make_graph(
            [helper.make_node("F0", ["x"], ["y"], domain="com.example")],
            "g",
            [fp32("x", [4])],
            [fp32("y", [4])],
        )
        model = helper.make_model(graph, opset_imports=opsets, functions=functions)
        return model.SerializeToString()

    def support(levels: int) -> bool:
        graph = load_graph(chain(levels))
        return model_support(graph, load_ops_table(), "10.1").nodes[0].supported

    assert support(24)  # Relu at depth 24
    deep = model_support(load_graph(chain(25)), load_ops_table(), "10.1").nodes[0]
    assert not deep.supported
    assert "exceed the maximum allowed by TensorRT" in (deep.reason or "")
