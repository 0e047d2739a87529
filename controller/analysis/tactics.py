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
        needs_one_of=frozenset({"CUBLAS", "CUBLAS_LT"}),
        words="Could not find any implementation for node {ForeignNode[...LoopOutput]}",
    ),
)


def tactic_refusals(
    graph: Graph, support: ModelSupport, trt_version: str, disabled: Collection[str]
) -> list[str]:
    """``node: reason`` for each node (top level, or the top-level node holding it) the builder
    of ``trt_version`` cannot build with the tactic sources ``disabled``; empty when none."""
    off = frozenset(disabled)
    out: list[str] = []
    for rule in RULES:
        if rule.trt_version != trt_version or not rule.needs_one_of <= off:
            continue
        sources = "/".join(sorted(rule.needs_one_of))
        why = (
            f"needs a {sources} tactic on TensorRT {trt_version} and the config turns "
            f'{sources} off ("{rule.words}")'
        )
        for name, op_type in _nodes(graph, support):
            if op_type in rule.ops:
                out.append(f"{name}: {op_type} {why}")
    return out


def _nodes(graph: Graph, support: ModelSupport) -> Sequence[tuple[str, str]]:
    """(where, op type) of every top-level node and every node nested under one (a function
    body's nodes count where a node calls it: the parser inlines them, from 9.0 only)."""
    top = [(n.name, n.op_type) for n in graph.nodes]
    nested = [(n.path, n.op_type) for n in support.nested if n.parent is not None]
    return [*top, *nested]
