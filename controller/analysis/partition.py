"""GPU partitions: maximal connected groups of supported nodes that keep the graph acyclic.

A group of supported nodes becomes one TensorRT engine. Contracting every group to one node must
leave a DAG: if a path leaves a group and comes back into it (through a CPU node or another
group), the engine would need its own output as an input. :func:`partition_dag` grows groups in
topological order, merging a node with its supported producers' groups only when the contracted
graph stays acyclic, then merges adjacent groups while that remains true. The contracted graph keeps
a topological order of its own, so each of those acyclicity checks searches only between the two
groups concerned (:class:`_Contracted`).

:func:`partition_graph` applies this to an ONNX graph and lists the tensors that cross between
the CPU and an engine, with their bytes per inference. Constant nodes and nodes folding constants
(:func:`controller.analysis.fold.build_time_constants`) are left out: TensorRT folds them into
whichever engine consumes them. Pure.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from controller.analysis.fold import build_time_constants
from controller.analysis.graph import Graph

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


class _Contracted:
    """The graph with every group contracted to one vertex, kept in a topological order.

    Vertices are the classes of a union-find over nodes: a group is one class, any other node
    its own. ``rank`` is a topological order of the contracted graph, kept valid under edge
    contraction as XLA's ``GraphCycles`` does (Pearce and Kelly's dynamic topological order): a
    path from ``a`` to ``b`` can only pass vertices ranked between the two, so each question
    "would contracting this edge make a cycle?" searches that window instead of the whole graph.
    A chain of n nodes is partitioned in O(n) (the old search walked everything downstream of
    each node: O(n²)).
    """

    def __init__(self, successors: Sequence[Sequence[int]]) -> None:
        self.order = topological_order(successors)
        count = len(successors)
        self.rank = [0] * count
        for position, node in enumerate(self.order):
            self.rank[node] = position
        self.parent = list(range(count))
        self.out: list[set[int]] = [set(targets) for targets in successors]
        self.into: list[set[int]] = [set() for _ in successors]
        for source, targets in enumerate(successors):
            for t in targets:
                self.into[t].add(source)

    def find(self, node: int) -> int:
        """The vertex ``node`` belongs to (its class representative)."""
        parent = self.parent
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def contract(self, a: int, b: int) -> int | None:
        """Merge vertices ``a`` and ``b`` (an edge a → b) into one; None, and nothing changed,
        when another path from ``a`` to ``b`` exists (the merged vertex would be on a cycle)."""
        if self._reachable_around(a, b):
            return None
        keep, gone = (a, b) if self._degree(a) >= self._degree(b) else (b, a)
        out, into = self.out[gone], self.into[gone]
        self.out[gone], self.into[gone] = set(), set()
        for y in out:
            self.into[y].discard(gone)
        for y in into:
            self.out[y].discard(gone)
        self.parent[gone] = keep
        for y in out:
            if y != keep:
                self._insert(keep, y)
        for y in into:
            if y != keep:
                self._insert(y, keep)
        return keep

    def _degree(self, vertex: int) -> int:
        return len(self.out[vertex]) + len(self.into[vertex])

    def _reachable_around(self, a: int, b: int) -> bool:
        """Is ``b`` reachable from ``a`` by a path other than the edge a → b itself?"""
        rank, limit = self.rank, self.rank[b]
        stack = [x for x in self.out[a] if x != b and rank[x] < limit]
        seen = set(stack)
        while stack:
            for w in self.out[stack.pop()]:
                if w == b:
                    return True
                if w not in seen and rank[w] < limit:
                    seen.add(w)
                    stack.append(w)
        return False

    def _insert(self, x: int, y: int) -> None:
        """Add the edge x → y, re-ranking the vertices between them when y ranked before x."""
        if y in self.out[x]:
            return
        self.out[x].add(y)
        self.into[y].add(x)
        rank = self.rank
        lower, upper = rank[y], rank[x]
        if upper < lower:
            return
        forward = self._window(y, self.out, lambda v: rank[v] < upper)
        backward = self._window(x, self.into, lambda v: rank[v] > lower)
        moved = sorted(backward, key=rank.__getitem__) + sorted(forward, key=rank.__getitem__)
        for vertex, new_rank in zip(moved, sorted(rank[v] for v in moved), strict=True):
            rank[vertex] = new_rank

    @staticmethod
    def _window(start: int, edges: Sequence[set[int]], inside: Callable[[int], bool]) -> list[int]:
        seen = {start}
        stack = [start]
        while stack:
            for w in edges[stack.pop()]:
                if w not in seen and inside(w):
                    seen.add(w)
                    stack.append(w)
        return list(seen)


def partition_dag(
    successors: Sequence[Sequence[int]], supported: Sequence[bool]
) -> list[list[int]]:
    """Groups of supported nodes (each sorted), largest first; nodes are ``0..n-1``."""
    graph = _Contracted(successors)
    predecessors: list[list[int]] = [[] for _ in successors]
    for source, targets in enumerate(successors):
        for t in targets:
            predecessors[t].append(source)
    groups = _Groups(graph)
    for node in graph.order:
        if not supported[node]:
            continue
        candidates = sorted(
            {graph.find(p) for p in predecessors[node] if groups.grouped[p]},
            key=lambda v: (-groups.size[v], groups.label[v]),
        )
        target: int | None = None
        for vertex in candidates:
            if target is None:
                target = groups.merge(vertex, node)
            else:
                merged = groups.merge(vertex, target, keep_label_of=target)
                target = target if merged is None else merged
        groups.grouped[node] = True
    _merge_adjacent(groups, successors)
    members: dict[int, list[int]] = {}
    for node in range(len(successors)):
        if groups.grouped[node]:
            members.setdefault(graph.find(node), []).append(node)
    return sorted(members.values(), key=lambda p: (-len(p), p[0]))


class _Groups:
    """Which nodes are grouped, and each group's size and label (its first node, for ties)."""

    def __init__(self, graph: _Contracted) -> None:
        self.graph = graph
        self.grouped = [False] * len(graph.parent)
        self.size = [1] * len(graph.parent)
        self.label = list(range(len(graph.parent)))

    def merge(self, a: int, b: int, keep_label_of: int | None = None) -> int | None:
        """Contract the edge a → b; the merged vertex keeps the label of ``a`` (or of
        ``keep_label_of``); None when that would make a cycle."""
        label = self.label[a if keep_label_of is None else keep_label_of]
        size = self.size[a] + self.size[b]
        merged = self.graph.contract(a, b)
        if merged is not None:
            self.size[merged], self.label[merged] = size, label
        return merged


def _merge_adjacent(groups: _Groups, successors: Sequence[Sequence[int]]) -> None:
    graph = groups.graph
    changed = True
    while changed:
        changed = False
        for source in graph.order:
            if not groups.grouped[source]:
                continue
            for t in successors[source]:
                if not groups.grouped[t]:
                    continue
                a, b = graph.find(source), graph.find(t)
                if a != b and groups.merge(a, b) is not None:
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
    static = build_time_constants(graph)
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
    exact = info.itemsize is not None and not info.dynamic
    count = 1
    for dim in info.shape:
        if dim is None or dim < 0:
            exact = False
        else:
            count *= dim
    return count * (info.itemsize or 1), exact
