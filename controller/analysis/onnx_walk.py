"""Every node and every tensor of an ONNX model, wherever the format lets one hide.

An ONNX model keeps nodes and tensors in more places than ``model.graph``: subgraphs (If, Loop,
Scan bodies), model-local **functions** (whose nodes ONNX Runtime inlines when it loads the
model), attribute defaults of those functions, sparse tensors in attributes, and the training
graphs of ``training_info``. A check that walks the main graph only is a check an uploader can
step around (a probe's Constant with an EXTERNAL tensor inside a function made ONNX Runtime
read a file of the controller's). Every check over "all nodes" or "all tensors" walks them here.

Each item comes with where it was found (``the graph``, ``function evil.Leak``), for messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import onnx

Where = str
"""Where an item was found, for an operator's message: ``the graph``, ``function dom.Name``."""


def graphs(model: onnx.ModelProto) -> Iterator[tuple[Where, onnx.GraphProto]]:
    """The top-level graphs: the model's graph and the training graphs (without subgraphs)."""
    yield "the graph", model.graph
    for number, info in enumerate(model.training_info):
        yield f"training graph {number} (initialization)", info.initialization
        yield f"training graph {number} (algorithm)", info.algorithm


def nodes(model: onnx.ModelProto) -> Iterator[tuple[Where, onnx.NodeProto]]:
    """Every node: of the graphs, of their subgraphs and of every model-local function."""
    for where, graph in graphs(model):
        yield from _nodes_of(where, graph.node)
    for function in model.functions:
        yield from _nodes_of(_function_name(function), function.node)


def tensors(model: onnx.ModelProto) -> Iterator[tuple[Where, onnx.TensorProto]]:
    """Every tensor: initializers (dense and sparse) of every graph and subgraph, tensors held by
    attributes (``t``, ``tensors``, sparse ``sparse_tensor(s)``) of every node, and those of the
    attribute defaults of every function."""
    for where, graph in graphs(model):
        yield from _graph_tensors(where, graph)
    for function in model.functions:
        where = _function_name(function)
        for attribute in function.attribute_proto:
            yield from _attribute_tensors(where, attribute)
        for node in function.node:
            for attribute in node.attribute:
                yield from _attribute_tensors(where, attribute)


def _function_name(function: onnx.FunctionProto) -> Where:
    return f"function {function.domain}.{function.name}" if function.domain else function.name


def _nodes_of(
    where: Where, found: Iterable[onnx.NodeProto]
) -> Iterator[tuple[Where, onnx.NodeProto]]:
    for node in found:
        yield where, node
        for attribute in node.attribute:
            for sub in _subgraphs(attribute):
                yield from _nodes_of(where, sub.node)


def _subgraphs(attribute: onnx.AttributeProto) -> Iterator[onnx.GraphProto]:
    if attribute.HasField("g"):
        yield attribute.g
    yield from attribute.graphs


def _graph_tensors(
    where: Where, graph: onnx.GraphProto
) -> Iterator[tuple[Where, onnx.TensorProto]]:
    for tensor in graph.initializer:
        yield where, tensor
    for sparse in graph.sparse_initializer:
        yield where, sparse.values
        yield where, sparse.indices
    for node in graph.node:
        for attribute in node.attribute:
            yield from _attribute_tensors(where, attribute)


def _attribute_tensors(
    where: Where, attribute: onnx.AttributeProto
) -> Iterator[tuple[Where, onnx.TensorProto]]:
    if attribute.HasField("t"):
        yield where, attribute.t
    for tensor in attribute.tensors:
        yield where, tensor
    sparse = [attribute.sparse_tensor] if attribute.HasField("sparse_tensor") else []
    for value in (*sparse, *attribute.sparse_tensors):
        yield where, value.values
        yield where, value.indices
    for sub in _subgraphs(attribute):
        yield from _graph_tensors(where, sub)
