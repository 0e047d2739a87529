"""GPU partitions: connected, acyclic after contraction, maximal; crossings with their bytes."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

from controller.analysis.graph import load_graph
from controller.analysis.ops_table import load_ops_table
from controller.analysis.partition import Partitioning, partition_dag, partition_graph
from controller.analysis.support import node_support
from tests.analysis_models import chain_with_cpu_op_in_middle, diamond, fp32, make_model, weights


def partition_model(model: bytes, version: str = "10.1") -> Partitioning:
    graph = load_graph(model)
    support = node_support(graph, load_ops_table(), version)
    return partition_graph(graph, {s.index: s.supported for s in support})


def test_an_all_supported_graph_is_one_partition_without_crossings() -> None:
    model = make_model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"]),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("Add", ["r", "r"], ["y"]),
        ],
        [fp32("x", [1, 3, 8, 8])],
        [fp32("y", [1, 4, 6, 6])],
        [weights("w", [4, 3, 3, 3])],
    )
    parts = partition_model(model)
    assert parts.partitions == ((0, 1, 2),)
    assert parts.crossings == ()


def test_one_cpu_op_in_the_middle_makes_two_partitions_and_two_crossings() -> None:
    parts = partition_model(chain_with_cpu_op_in_middle())
    assert parts.partitions == ((0, 1), (3, 4))
    assert parts.placement[2] == "CPU"
    assert [(c.tensor, c.source, c.target) for c in parts.crossings] == [
        ("r1", "GPU#1", "CPU"),
        ("m", "CPU", "GPU#2"),
    ]
    assert [c.bytes for c in parts.crossings] == [8 * 16 * 16 * 4, 8 * 16 * 16 * 4]
    assert all(c.exact for c in parts.crossings)


def test_a_diamond_through_the_cpu_is_split_rather_than_made_cyclic() -> None:
    parts = partition_model(diamond())
    assert sorted(parts.partitions) == [(0,), (2,)]
    assert parts.placement[0] != parts.placement[2]
    routes = {(c.tensor, c.source, c.target) for c in parts.crossings}
    a, join = parts.placement[0], parts.placement[2]
    assert routes == {("a", a, "CPU"), ("a", a, join), ("b", "CPU", join)}


def test_constant_nodes_fold_into_their_consumer_instead_of_making_engines() -> None:
    model = make_model(
        [
            helper.make_node("Constant", [], ["w"], value=weights("v", [4, 3, 1, 1])),
            helper.make_node("Conv", ["x", "w"], ["y"]),
        ],
        [fp32("x", [1, 3, 4, 4])],
        [fp32("y", [1, 4, 4, 4])],
    )
    parts = partition_model(model)
    assert parts.partitions == ((1,),)
    assert parts.folded == {0}
    assert parts.crossings == ()


def test_unknown_dims_count_as_one_and_are_flagged() -> None:
    model = make_model(
        [
            helper.make_node("Relu", ["x"], ["a"]),
            helper.make_node("FancyOp", ["a"], ["b"], domain="com.example"),
        ],
        [fp32("x", ["batch", 10])],
        [fp32("b", ["batch", 10])],
    )
    crossing = partition_model(model).crossings[0]
    assert (crossing.tensor, crossing.bytes, crossing.exact) == ("a", 40, False)


def test_groups_that_are_each_fine_but_form_a_cycle_together_are_not_both_kept() -> None:
    # a1 -> a2, a1 -> b1, b2 -> b1, b2 -> a2 with cpu nodes in between: {a1,a2} and {b1,b2}
    # are each convex, yet contracting both gives A -> B -> A.
    # nodes: 0=a1 1=a2 2=b2 3=b1 4=cpu between a1 and b1, 5=cpu between b2 and a2
    successors = [[1, 4], [], [3, 5], [], [3], [1]]
    supported = [True, True, True, True, False, False]
    groups = partition_dag(successors, supported)
    assert not has_contracted_cycle(successors, groups)


def has_contracted_cycle(
    successors: Sequence[Sequence[int]], groups: Sequence[Sequence[int]]
) -> bool:
    label = {n: f"n{n}" for n in range(len(successors))}
    for i, g in enumerate(groups):
        for n in g:
            label[n] = f"g{i}"
    edges = {(label[s], label[t]) for s in range(len(successors)) for t in successors[s]} - {
        (x, x) for x in label.values()
    }
    nodes = set(label.values())
    indegree = dict.fromkeys(nodes, 0)
    for _, t in edges:
        indegree[t] += 1
    ready = [x for x in nodes if indegree[x] == 0]
    seen = 0
    while ready:
        current = ready.pop()
        seen += 1
        for s, t in edges:
            if s == current:
                indegree[t] -= 1
                if indegree[t] == 0:
                    ready.append(t)
    return seen != len(nodes)


def connected(members: Sequence[int], successors: Sequence[Sequence[int]]) -> bool:
    inside = set(members)
    undirected: dict[int, set[int]] = {n: set() for n in inside}
    for s in inside:
        for t in successors[s]:
            if t in inside:
                undirected[s].add(t)
                undirected[t].add(s)
    stack, seen = [members[0]], {members[0]}
    while stack:
        for m in undirected[stack.pop()] - seen:
            seen.add(m)
            stack.append(m)
    return seen == inside


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[list[int]], list[bool]]:
    n = draw(st.integers(1, 12))
    successors: list[list[int]] = [[] for _ in range(n)]
    for s in range(n):
        for t in range(s + 1, n):
            if draw(st.booleans()) and draw(st.booleans()):
                successors[s].append(t)
    supported = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return successors, supported


@settings(max_examples=300, deadline=None)
@given(dags())
def test_partitions_are_connected_acyclic_and_maximal(
    dag: tuple[list[list[int]], list[bool]],
) -> None:
    successors, supported = dag
    groups = partition_dag(successors, supported)
    placed = sorted(n for g in groups for n in g)
    assert placed == [n for n, ok in enumerate(supported) if ok]
    assert all(connected(g, successors) for g in groups)
    assert not has_contracted_cycle(successors, groups)
    group_of = {n: i for i, g in enumerate(groups) for n in g}
    for s, targets in enumerate(successors):
        for t in targets:
            a, b = group_of.get(s), group_of.get(t)
            if a is None or b is None or a == b:
                continue
            merged = [list(g) for i, g in enumerate(groups) if i not in (a, b)]
            merged.append([*groups[a], *groups[b]])
            assert has_contracted_cycle(successors, merged), (groups, s, t)
    assert [len(g) for g in groups] == sorted((len(g) for g in groups), reverse=True)


def test_a_cyclic_input_is_refused() -> None:
    with pytest.raises(ValueError, match="cycle"):
        partition_dag([[1], [0]], [True, True])
