"""Per node, subgraphs and functions included: would the TensorRT ONNX parser of a version take it.

:mod:`controller.analysis.rules` checks one node; this module walks what the parser walks
(onnx-tensorrt's importers at ``release/8.5-GA``, ``release/8.6-GA`` and ``release/10.1-GA``;
the unit tests name file and tag per rule):

- **Subgraphs.** ``If`` branches and ``Loop``/``Scan`` bodies are imported node by node, so a
  node the parser refuses inside one refuses the node that holds it. Nested nodes see the names
  of the graphs around them (an outer initializer stays weights). An ``If`` whose condition is
  weights of one value imports only the branch it selects; any other ``If`` becomes an
  IIfConditional, whose outputs take one tensor of each branch, and TensorRT of these releases
  wants both of the same shape ("IIfConditionalOutputLayer inputs must have the same shape").
  Shapes are ONNX shape inference's (at the assumed input shapes where dims are dynamic); where
  they stay unknown the node is supported with a note saying so, not refused.
- **Model-local functions.** A node calling one is imported as the function's body from
  TensorRT 9.0 (``LocalFunctionImporter``); the 8.x parsers have no function importer and look
  for a plugin of that name. A body is checked once however often it is called.

Partitioning stays over the top-level graph: :func:`model_support` answers per top-level node
and lists the nested nodes apart, by path (``If_3/then_branch/Conv_1``,
``function com.example.Block/Relu_0``). Pure: works on :class:`~controller.analysis.graph.Graph`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

from controller.analysis.graph import Graph, Node, TensorInfo
from controller.analysis.ops_table import OpsTable
from controller.analysis.rules import NodeSupport, Scope, check_node, scope_of

__all__ = ["ModelSupport", "NestedSupport", "NodeSupport", "model_support", "node_support"]

LOCAL_FUNCTION_VERSIONS = frozenset({"10.1"})
"""Versions in the table whose parser imports model-local functions (TensorRT 9.0 and later)."""

MAX_NESTING = 24
"""TensorRT 10.1 refuses nodes nested deeper (``ModelImporter.cpp`` ``kMAX_NESTED_SUBGRAPHS`` at
release/10.1-GA, absent at 8.5-GA and 8.6-GA); the walk stops there at every version (a chain
of calls must not exhaust the stack)."""

_NESTING_WORDS = (
    "ONNX graph contains nested structures that exceed the maximum allowed by TensorRT!"
)
_IF_WORDS = "IIfConditionalOutputLayer inputs must have the same shape."

Key = tuple[str, str]


@dataclass(frozen=True)
class NestedSupport:
    """A node of a subgraph or of a function body, and its support."""

    path: str
    """Where it is: ``If_3/then_branch/Conv_1``, ``function com.example.Block/Relu_0``."""
    op_type: str
    parent: int | None
    """The top-level node whose subgraph holds it; None in a function body."""
    support: NodeSupport


@dataclass(frozen=True)
class ModelSupport:
    """Support of the top-level nodes (graph order), the nested nodes, and model-wide notes."""

    nodes: tuple[NodeSupport, ...]
    nested: tuple[NestedSupport, ...]
    notes: tuple[str, ...]


def node_support(graph: Graph, table: OpsTable, trt_version: str) -> list[NodeSupport]:
    """One :class:`NodeSupport` per top-level node of ``graph``, in graph order (a node holding
    or calling a node the parser refuses is refused)."""
    return list(model_support(graph, table, trt_version).nodes)


def model_support(graph: Graph, table: OpsTable, trt_version: str) -> ModelSupport:
    """Every node's support: the top-level ones, and those nested in subgraphs and functions."""
    walker = _Walker(graph, table, trt_version)
    nodes = walker.walk(graph, scope_of(graph, trt_version), "", None, 0)
    nested = tuple(n for n in walker.nested if n is not None)
    return ModelSupport(tuple(nodes), nested, dim_name_notes(graph))


def dim_name_notes(graph: Graph) -> tuple[str, ...]:
    """Symbolic dims named alike (``?`` everywhere, as some exporters write): TensorRT takes them
    to be one dim; the agent renames them before it builds, so they refuse nothing."""
    counts = Counter(name for names in graph.dim_params.values() for name in names)
    repeated = sorted(name for name, count in counts.items() if count > 1)
    if not repeated:
        return ()
    names = ", ".join(f"{name!r} ({counts[name]} dims)" for name in repeated)
    return (
        f"input dims share a name: {names}; TensorRT takes equally named dims to be equal "
        '("Input dimensions with this name are inconsistent" otherwise): the agent renames them '
        "before the build",
    )


class _Walker:
    def __init__(self, root: Graph, table: OpsTable, trt_version: str) -> None:
        self.functions = root.functions
        self.table = table
        self.version = trt_version
        self.assumed = root.assumed.text() if root.assumed else None
        self.nested: list[NestedSupport | None] = []
        self.bodies: dict[Key, tuple[str, NodeSupport] | None] = {}
        self.calling: set[Key] = set()

    def walk(
        self, graph: Graph, scope: Scope, prefix: str, parent: int | None, depth: int
    ) -> list[NodeSupport]:
        """``graph``'s nodes; nested ones (``prefix`` not empty) are listed in ``self.nested``."""
        out: list[NodeSupport] = []
        for node in graph.nodes:
            slot = len(self.nested)
            if prefix:
                self.nested.append(None)
            owner = parent if prefix else node.index
            result = self._node(node, scope, prefix, owner, depth)
            if prefix:
                self.nested[slot] = NestedSupport(prefix + node.name, node.op_type, owner, result)
            out.append(result)
        return out

    def _node(
        self, node: Node, scope: Scope, prefix: str, owner: int | None, depth: int
    ) -> NodeSupport:
        if depth > MAX_NESTING:
            if self.version in LOCAL_FUNCTION_VERSIONS:  # the releases with the limit
                return NodeSupport(node.index, False, f'"{_NESTING_WORDS}"', "restriction")
            why = f"nested more than {MAX_NESTING} subgraphs or calls deep: not analysed"
            return NodeSupport(node.index, False, why, "restriction")
        key = (node.domain, node.op_type)
        if key in self.functions and not (node.is_default_domain and self.table.get(node.op_type)):
            return self._call(node, key, depth)
        result = check_node(node, scope, self.table)
        if not node.subgraphs:
            return result
        imported = _imported(node, scope)
        failure: tuple[str, NodeSupport] | None = None
        scopes: dict[str, Scope] = {}
        # the If importer imports then_branch first (importSubgraph), whatever the proto order
        for name, sub in sorted(node.subgraphs, key=lambda kv: kv[0] != "then_branch"):
            if name not in imported:
                continue
            where = f"{prefix}{node.name}/{name}/"
            scopes[name] = scope_of(sub, self.version, scope)
            inner = self.walk(sub, scopes[name], where, owner, depth + 1)
            bad = next(
                ((n, r) for n, r in zip(sub.nodes, inner, strict=True) if not r.supported), None
            )
            if failure is None and bad is not None:
                failure = (where + bad[0].name, bad[1])
        if not result.supported:
            return result
        if failure is not None:
            return NodeSupport(
                node.index, False, f"{failure[0]}: {failure[1].reason}", failure[1].kind
            )
        if node.op_type != "If":
            return result
        if len(scopes) == 1:
            branch = next(iter(scopes))
            only = f"the condition is a constant: the parser imports the {branch} only"
            return dataclasses.replace(result, note=only)
        refusal, unknown = self._if_outputs(node, scopes)
        if refusal is not None:
            return NodeSupport(node.index, False, f"If: {refusal}", "restriction")
        return dataclasses.replace(result, note=unknown) if unknown else result

    def _call(self, node: Node, key: Key, depth: int) -> NodeSupport:
        label = function_label(key)
        failure = self._body(key, depth + 1)
        if self.version not in LOCAL_FUNCTION_VERSIONS:
            return NodeSupport(
                node.index,
                False,
                f"{node.op_type} calls the model-local function {label}, and the TensorRT "
                f'{self.version} ONNX parser imports no functions: "No importer registered for '
                f'op: {node.op_type}. Attempting to import as plugin." then "Plugin not found, '
                'are the plugin name, version, and namespace correct?" (functions are '
                "supported from TensorRT 10.1)",
                "unknown_op",
            )
        if failure is None:
            return NodeSupport(node.index, True)
        return NodeSupport(node.index, False, f"{failure[0]}: {failure[1].reason}", failure[1].kind)

    def _body(self, key: Key, depth: int) -> tuple[str, NodeSupport] | None:
        """The first node of function ``key``'s body the parser refuses (None: all taken)."""
        label = function_label(key)
        if key in self.bodies:
            return self.bodies[key]
        if key in self.calling:
            return f"function {label}", NodeSupport(
                -1, False, "the function calls itself", "unsupported_op"
            )
        self.calling.add(key)
        body = self.functions[key]
        prefix = f"function {label}/"
        results = self.walk(body, scope_of(body, self.version), prefix, None, depth)
        self.calling.discard(key)
        failure = next(
            (
                (prefix + n.name, r)
                for n, r in zip(body.nodes, results, strict=True)
                if not r.supported
            ),
            None,
        )
        self.bodies[key] = failure
        return failure

    def _if_outputs(self, node: Node, scopes: dict[str, Scope]) -> tuple[str | None, str | None]:
        """(TensorRT's refusal, or a note where shapes are unknown) for an IIfConditional."""
        then, other = scopes["then_branch"], scopes["else_branch"]
        if len(then.graph.outputs) != len(other.graph.outputs):
            return '"then/else subgraphs should have the same number of outputs."', None
        unknown: list[str] = []
        for a_name, b_name in zip(then.graph.outputs, other.graph.outputs, strict=True):
            a, b = then.tensor(a_name), other.tensor(b_name)
            dynamic = any(t is not None and t.dynamic for t in (a, b))
            at = f" at {self.assumed}" if dynamic and self.assumed else ""
            pair = f"then_branch {a_name} {_dims(a)}, else_branch {b_name} {_dims(b)}{at}"
            verdict = _compare(a, b)
            if verdict == "differ":
                return f'"{_IF_WORDS} Shapes are {_dims(a)} and {_dims(b)}." ({pair})', None
            if verdict == "unknown":
                unknown.append(pair)
        if not unknown:
            return None, None
        return None, (
            f"the If outputs' shapes are not known before the build ({'; '.join(unknown)}): "
            f'TensorRT {self.version} refuses the model if they differ ("{_IF_WORDS}")'
        )


def function_label(key: Key) -> str:
    domain, name = key
    return f"{domain}.{name}" if domain else name


def _imported(node: Node, scope: Scope) -> frozenset[str]:
    """The subgraphs the parser imports: an If on a one-value weights condition imports only
    the branch it selects (``cond.is_weights() && cond.weights().count() == 1``)."""
    names = frozenset(name for name, _ in node.subgraphs)
    cond = node.input(0)
    if node.op_type != "If" or cond is None or not scope.is_weights(cond):
        return names
    value = scope.value(cond)
    if value is None or len(value) != 1:
        return names
    return frozenset({"then_branch" if value[0] else "else_branch"})


def _compare(a: TensorInfo | None, b: TensorInfo | None) -> str:
    """``same``, ``differ`` or ``unknown``: two branch outputs' shapes, as far as known."""
    if a is None or b is None or a.shape is None or b.shape is None:
        return "unknown"
    if len(a.shape) != len(b.shape):
        return "differ"
    fixed = not a.dynamic and not b.dynamic
    if None not in a.shape and None not in b.shape:
        if a.shape != b.shape:
            return "differ"
        return "same" if fixed else "unknown"  # equal at the assumed input shapes only
    pairs = zip(a.shape, b.shape, strict=True)
    clash = any(x is not None and y is not None and x != y for x, y in pairs)
    return "differ" if fixed and clash else "unknown"


def _dims(info: TensorInfo | None) -> str:
    if info is None or info.shape is None:
        return "(rank unknown)"
    return "[" + ",".join("?" if d is None else str(d) for d in info.shape) + "]"
