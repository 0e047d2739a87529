"""No import circles in either program: between modules, and between the top-level parts of
``agent``, ``controller`` and ``shared`` (a package and the leaf modules beside it).

Every import counts, type-only ones under ``if TYPE_CHECKING:`` and imports inside functions
included: a circle hidden from the interpreter is still one a reader has to untangle. The import
contracts in pyproject.toml say which way each arrow may run; this says that none comes back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import grimp
import pytest

PROGRAMS = ("shared", "agent", "controller")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PROGRAMS, include_external_packages=False, cache_dir=None)


def _imports(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def _top_parts(imports: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The same graph over ``agent.link``, ``agent.settings``, ``controller.db``...: each module
    counted as the top-level part of its program it belongs to; arrows inside a part dropped."""

    def part(module: str) -> str:
        return ".".join(module.split(".")[:2])

    parts: dict[str, set[str]] = {}
    for importer, imported in imports.items():
        edges = parts.setdefault(part(importer), set())
        edges.update(part(m) for m in imported if part(m) != part(importer))
    return parts


def _knots(edges: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm,
    iterative): each node of one reaches every other, so each holds at least one circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
    return components


def _circles(edges: Mapping[str, Iterable[str]]) -> list[str]:
    """A shortest circle ``a → b → ... → a`` through each knot, with the knot's other members."""
    found = []
    for knot in _knots(edges):
        circle = _shortest_circle(edges, knot)
        others = sorted(knot - set(circle))
        also = f" (its knot also holds {', '.join(others)})" if others else ""
        found.append(" → ".join(circle) + also)
    return found


def _shortest_circle(edges: Mapping[str, Iterable[str]], component: set[str]) -> list[str]:
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(edges.get(node, ())):
                if nxt == start:
                    return [*paths[node], start]
                if nxt in component and nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no way back to {start} in {sorted(component)}")  # pragma: no cover


def _report(circles: list[str]) -> str:
    return "import circles:\n" + "\n".join(f"  {circle}" for circle in circles)


def test_no_module_imports_itself_back(graph: grimp.ImportGraph) -> None:
    circles = _circles(_imports(graph))
    assert not circles, _report(circles)


def test_no_two_top_level_parts_import_each_other(graph: grimp.ImportGraph) -> None:
    circles = _circles(_top_parts(_imports(graph)))
    assert not circles, _report(circles)


def test_the_checker_finds_a_circle() -> None:
    edges = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x", "a.w"}, "a.w": set()}
    assert _circles(edges) == ["a.x → a.y → a.z → a.x"]
    edges = {"a.x": {"a.y"}, "a.y": {"a.x", "a.z"}, "a.z": {"a.y"}}
    assert _circles(edges) == ["a.x → a.y → a.x (its knot also holds a.z)"]
    parts = _top_parts({"a.p.m": {"a.q"}, "a.q": {"a.p.n"}, "a.p.n": set()})
    assert _circles(parts) == ["a.p → a.q → a.p"]
    assert _circles({"a.x": {"a.y"}, "a.y": set()}) == []
