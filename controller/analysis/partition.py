"""GPU partitions: maximal connected groups of supported nodes that keep the graph acyclic.

A group of supported nodes becomes one TensorRT engine. Contracting every group to one node must
leave a DAG: if a path leaves a group and comes back into it (through a CPU node or another
group), the engine would need its own output as an input. :func:`partition_dag` grows groups in
topological order, merging a node with its supported producers' groups only when the contracted
graph stays acyclic, then merges adjacent groups while that remains true.

:func:`partition_graph` applies this to an ONNX graph and lists the tensors that cross between
the CPU and an engine, with their bytes per inference. Constant nodes and nodes folding constants
are left out: TensorRT folds them into whichever engine consumes them. Pure.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.analysis.graph import Graph
from controller.analysis.support import static_tensors

CPU = "CPU"


def topological_order(successors: Sequence[Sequence[int]]) -> list[int]:
    """Kahn's order of nodes ``0..n-1`` (ties by index); ValueError if there is a cycle."""
    indegree = [0] * len(successors)
    for targets in successors:
        for t in targets:
            indegree[t] += 1
    ready = deque(i for i, d in enumerate(indegree) if d == 0)
    order: list[int] = []
    while ready:
        node = ready.popleft()
        order.append(node)
        for t in successors[node]:
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    if len(order) != len(successors):
        raise ValueError("the graph has a cycle; ONNX graphs must be acyclic")
    return order


class _Groups:
    """Union of nodes into groups, with the contracted-graph cycle test."""

    def __init__(self, successors: Sequence[Sequence[int]]) -> None:
        self.successors = successors
        self.group: list[int] = [-1] * len(successors)
        self.members: dict[int, set[int]] = {}

    def new(self, node: int) -> None:
        self.group[node] = node
        self.members[node] = {node}

    def add(self, target: int, node: int) -> None:
        self.group[node] = target
        self.members[target].add(node)

    def absorb(self, target: int, other: int) -> None:
        for node in self.members.pop(other):
            self.group[node] = target
            self.members[target].add(node)

    def would_cycle(self, nodes: set[int]) -> bool:
        """Would contracting ``nodes`` (plus the existing groups) create a cycle?"""
        inside_groups = {self.group[n] for n in nodes if self.group[n] >= 0}
        seen_nodes: set[int] = set()
        seen_groups: set[int] = set(inside_groups)
        frontier = deque(s for n in nodes for s in self.successors[n] if s not in nodes)
        while frontier:
            node = frontier.popleft()
            if node in nodes:
                return True
            if node in seen_nodes:
                continue
            seen_nodes.add(node)
            g = self.group[node]
            if g < 0:
                expand: set[int] = {node}
            elif g in seen_groups:
                continue
            else:
                seen_groups.add(g)
                expand = self.members[g]
            for member in expand:
                seen_nodes.add(member)
                frontier.extend(self.successors[member])
        return False


def partition_dag(
    successors: Sequence[Sequence[int]], supported: Sequence[bool]
) -> list[list[int]]:
    """Groups of supported nodes (each sorted), largest first; nodes are ``0..n-1``."""
    order = topological_order(successors)
    predecessors: list[list[int]] = [[] for _ in successors]
    for source, targets in enumerate(successors):
        for t in targets:
            predecessors[t].append(source)
    groups = _Groups(successors)
    for node in order:
        if not supported[node]:
            continue
        candidates = sorted(
            {groups.group[p] for p in predecessors[node] if groups.group[p] >= 0},
            key=lambda g: (-len(groups.members[g]), g),
        )
        target: int | None = None
        for g in candidates:
            if target is None:
                if not groups.would_cycle(groups.members[g] | {node}):
                    groups.add(g, node)
                    target = g
            elif not groups.would_cycle(groups.members[target] | groups.members[g]):
                groups.absorb(target, g)
        if target is None:
            groups.new(node)
    _merge_adjacent(groups, order)
    parts = [sorted(m) for m in groups.members.values()]
    return sorted(parts, key=lambda p: (-len(p), p[0]))


def _merge_adjacent(groups: _Groups, order: Sequence[int]) -> None:
    changed = True
    while changed:
        changed = False
        for source in order:
            a = groups.group[source]
            if a < 0:
                continue
            for t in groups.successors[source]:
                b = groups.group[t]
                if b < 0 or b == a:
                    continue
                if not groups.would_cycle(groups.members[a] | groups.members[b]):
                    groups.absorb(a, b)
                    changed = True


@dataclass(frozen=True)
class Crossing:
    """A tensor copied between the CPU and an engine (or between two engines) per inference."""

    tensor: str
    source: str
    target: str
    dtype: str
    shape: tuple[int | None, ...] | None
    bytes: int
    exact: bool
    """False when a dim (or the rank, or the element size) is unknown and was counted as 1."""


@dataclass(frozen=True)
class Partitioning:
    """Engines (node indices, largest first), where each node runs, and the crossings."""

    partitions: tuple[tuple[int, ...], ...]
    placement: Mapping[int, str]
    """Node index → ``"GPU#k"`` (k = 1-based partition number) or ``"CPU"``; folded nodes absent."""
    folded: frozenset[int]
    crossings: tuple[Crossing, ...]

    @property
    def crossing_bytes(self) -> int:
        return sum(c.bytes for c in self.crossings)


def partition_graph(graph: Graph, supported: Mapping[int, bool]) -> Partitioning:
    """Partition ``graph`` given each node's support (by node index)."""
    static = static_tensors(graph)
    folded = frozenset(
        n.index
        for n in graph.nodes
        if n.outputs and all(not name or name in static for name in n.outputs)
    )
    live = [n for n in graph.nodes if n.index not in folded]
    position = {n.index: i for i, n in enumerate(live)}
    producer: dict[str, int] = {}
    for n in live:
        for name in n.outputs:
            if name:
                producer[name] = n.index
    successors: list[list[int]] = [[] for _ in live]
    for n in live:
        for name in {i for i in n.inputs if i in producer}:
            successors[position[producer[name]]].append(position[n.index])
    groups = partition_dag(successors, [supported.get(n.index, False) for n in live])
    partitions = tuple(tuple(sorted(live[i].index for i in g)) for g in groups)
    placement: dict[int, str] = {n.index: CPU for n in live}
    for number, part in enumerate(partitions, start=1):
        for index in part:
            placement[index] = f"GPU#{number}"
    return Partitioning(
        partitions=partitions,
        placement=placement,
        folded=folded,
        crossings=tuple(_crossings(graph, producer, placement)),
    )


def _crossings(
    graph: Graph, producer: Mapping[str, int], placement: Mapping[int, str]
) -> list[Crossing]:
    seen: set[tuple[str, str]] = set()
    out: list[Crossing] = []
    for node in graph.nodes:
        if node.index not in placement:
            continue
        target = placement[node.index]
        for name in node.inputs:
            if name not in producer:
                continue
            source = placement[producer[name]]
            if source == target or (name, target) in seen:
                continue
            seen.add((name, target))
            size, exact = tensor_bytes(graph, name)
            info = graph.tensor(name)
            out.append(
                Crossing(
                    tensor=name,
                    source=source,
                    target=target,
                    dtype=info.dtype if info else "?",
                    shape=info.shape if info else None,
                    bytes=size,
                    exact=exact,
                )
            )
    return out


def tensor_bytes(graph: Graph, name: str) -> tuple[int, bool]:
    """Bytes of one inference's tensor ``name``; unknown dims count as 1 (then ``exact`` False)."""
    info = graph.tensor(name)
    if info is None or info.shape is None:
        return (info.itemsize or 1) if info else 1, False
    exact = info.itemsize is not None
    count = 1
    for dim in info.shape:
        if dim is None:
            exact = False
        else:
            count *= dim
    return count * (info.itemsize or 1), exact
