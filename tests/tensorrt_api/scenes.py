"""The few values each path needs from TensorRT, scripted on a stand-in (inputs, never results)."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from agent.trt_host.build import ShapeRange
from agent.trt_host.versions import Capabilities
from tests.tensorrt_api.standin import VERSIONS, StandIn

X_SHAPE = (-1, 3, 16, 16)
Y_SHAPE = (-1, 3, 16, 16)
TWO_INPUTS = (
    (
        ShapeRange("x", (1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)),
        ShapeRange("y", (1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)),
    ),
)


def caps_of(s: StandIn) -> Capabilities:
    """The host's capabilities for the release ``s`` stands in for."""
    return Capabilities.for_version(VERSIONS[s.release])


def network_with_two_dynamic_inputs(
    s: StandIn, profile_index: int = 0, layer_types: tuple[str, ...] = ("CONVOLUTION",)
) -> None:
    tensors = [
        s.make("ITensor", name="x", shape=X_SHAPE),
        s.make("ITensor", name="y", shape=Y_SHAPE),
    ]
    layers = [s.make("ILayer", type=getattr(s.module.LayerType, kind)) for kind in layer_types]
    s.script("INetworkDefinition.num_layers", len(layers))
    s.script("INetworkDefinition.get_layer", lambda self, i: layers[i])
    s.script("OnnxParser.parse", True)
    s.script("INetworkDefinition.num_inputs", 2)
    s.script("INetworkDefinition.get_input", lambda self, i: tensors[i])
    s.script("IBuilderConfig.add_optimization_profile", profile_index)
    s.script("IBuilderConfig.get_tactic_sources", 0b11111)
    s.script("Builder.num_DLA_cores", 2)
    s.script("Builder.platform_has_fast_fp16", True)


def engine_with_two_inputs(s: StandIn, dtype: str = "FLOAT", set_shape_ok: bool = True) -> None:
    trt = s.module
    names = ["x", "y", "out"]
    s.script("ICudaEngine.num_io_tensors", 3)
    s.script("ICudaEngine.get_tensor_name", lambda self, i: names[i])
    s.script(
        "ICudaEngine.get_tensor_mode",
        lambda self, n: trt.TensorIOMode.OUTPUT if n == "out" else trt.TensorIOMode.INPUT,
    )
    s.script("ICudaEngine.get_tensor_shape", lambda self, n: (-1, 3, 16, 16))
    s.script(
        "ICudaEngine.get_tensor_dtype",
        lambda self, n: getattr(trt.DataType, dtype) if n == "out" else trt.DataType.FLOAT,
    )
    s.script("ICudaEngine.device_memory_size", 1 << 20)
    s.script("ICudaEngine.device_memory_size_v2", 1 << 20)
    s.script("ICudaEngine.refittable", True)
    s.script("IExecutionContext.get_tensor_shape", lambda self, n: (2, 3, 16, 16))

    def set_input_shape(self: Any, name: str, shape: Any) -> bool:
        if not set_shape_ok:
            logger = s.recorder.calls("Runtime.__init__")[-1].args[0]
            logger.log(trt.ILogger.Severity.ERROR, "IExecutionContext::setInputShape: Error Code 3")
        return set_shape_ok

    s.script("IExecutionContext.set_input_shape", set_input_shape)

    def execute(self: Any, **kwargs: Any) -> bool:
        profiler = self.__dict__["_standin_values"].get("profiler")
        if profiler is not None:
            profiler.report_layer_time("/conv/Conv + /relu/Relu", 0.25)
        return True

    s.script("IExecutionContext.execute_async_v3", execute)


def feeds() -> dict[str, np.ndarray]:
    x = np.ones((2, 3, 16, 16), np.float32)
    return {"x": x, "y": x}


def conv_onnx(seed: int = 0) -> bytes:
    """x, y (dynamic batch) → Conv(x + y) + bias → Relu: initializers w and b."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.normal(0, 0.1, (3, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(0, 0.1, (3,)).astype(np.float32), "b")
    nodes = [
        helper.make_node("Add", ["x", "y"], ["s"], name="add"),
        helper.make_node("Conv", ["s", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["out"], name="relu"),
    ]
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 3, 16, 16]) for n in "xy"]
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 3, 16, 16])
    graph = helper.make_graph(nodes, "two_inputs", info, [out], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    data: bytes = model.SerializeToString()
    return data
