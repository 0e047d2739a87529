"""Builder refusals that come from the delegate config's tactic sources, not from the parser.

The ONNX parser imports ``LSTM``, ``GRU`` and ``RNN`` as an ``ILoop`` of matrix multiplies, and
the builder then needs a kernel for that loop. TensorRT 8.5 has none without cuBLAS: with the
``CUBLAS`` and ``CUBLAS_LT`` tactic sources both off (``disabled_tactic_sources``, as on a
memory-tight Jetson or a host without cuBLAS) the build stops with "Could not find any
implementation for node {ForeignNode[...LoopOutput]}" and the slot falls back to ONNX Runtime.
TensorRT 8.6 builds the same loops with the cuBLAS sources off. Each row of :data:`RULES` was
seen on real TensorRT (``tests/tensorrt/test_tactic_sources.py`` builds every recurrent operator
under every set of disabled sources the host allows; results in
``bench/results/tensorrt-h200.md``). Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from controller.analysis.graph import Graph
from controller.analysis.support import ModelSupport

RECURRENT_OPS = frozenset({"LSTM", "GRU", "RNN"})


@dataclass(frozen=True)
class TacticRule:
    """On ``trt_version``, ``ops`` fail to build when every source of ``needs_one_of`` is off."""

    trt_version: str
    ops: frozenset[str]
    needs_one_of: frozenset[str]
    words: str


RULES: tuple[TacticRule, ...] = (
    TacticRule(
        trt_version="8.5",
        ops=RECURRENT_OPS,
        needs_one_of=frozenset({"CUBLAS", "CUBLAS_LT", "CUDNN"}),
        words="Could not find any implementation for node {ForeignNode[...LoopOutput]}",
    ),
)


def refused_ops(
    trt_version: str, disabled: Collection[str], op_types: Collection[str]
) -> dict[str, str]:
    """Operator type → why the builder of ``trt_version`` cannot build it with the tactic
    sources ``disabled`` off, for those of ``op_types`` it cannot; empty when none."""
    off = frozenset(disabled)
    out: dict[str, str] = {}
    for rule in RULES:
        if rule.trt_version != trt_version or not rule.needs_one_of <= off:
            continue
        sources = "/".join(sorted(rule.needs_one_of))
        for op_type in sorted(rule.ops & frozenset(op_types)):
            out[op_type] = (
                f"{op_type} needs a {sources} tactic on TensorRT {trt_version} and the config "
                f'turns {sources} off ("{rule.words}")'
            )
    return out


def tactic_refusals(
    graph: Graph, support: ModelSupport, trt_version: str, disabled: Collection[str]
) -> list[str]:
    """``node: reason`` for each node (top level, or nested under one) the builder of
    ``trt_version`` cannot build with the tactic sources ``disabled`` off; empty when none."""
    nodes = _nodes(graph, support)
    refused = refused_ops(trt_version, disabled, {op_type for _, op_type in nodes})
    return [f"{name}: {refused[op_type]}" for name, op_type in nodes if op_type in refused]


def _nodes(graph: Graph, support: ModelSupport) -> Sequence[tuple[str, str]]:
    """(where, op type) of every top-level node and every node nested under one (a function
    body's nodes count where a node calls it: the parser inlines them, from 9.0 only)."""
    top = [(n.name, n.op_type) for n in graph.nodes]
    nested = [(n.path, n.op_type) for n in support.nested if n.parent is not None]
    return [*top, *nested]
