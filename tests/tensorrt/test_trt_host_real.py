"""The TensorRT host's TensorRT side for real: build, infer on user-managed memory, refit, profile.

Marked ``tensorrt``: runs where ``import tensorrt`` works and a CUDA device answers (the H200
host with a TensorRT from PyPI gives 8.5.2 or 8.6.0); skips with the reason
elsewhere. Builds switch off cuBLAS/cuBLASLt/cuDNN tactics (not shipped on the H200 host, and a
memory saver on Jetsons) and TF32 (so FP32 matches ONNX Runtime to 1e-4). Imports only numpy,
onnx, onnxruntime, tensorrt, pytest and agent.trt_host.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from agent.trt_host import cudart
from agent.trt_host.build import BuildOptions, ShapeRange, build
from agent.trt_host.engine import load
from agent.trt_host.profiler import profile_layers
from agent.trt_host.refit import refit
from agent.trt_host.versions import Capabilities

pytestmark = pytest.mark.tensorrt

trt = pytest.importorskip("tensorrt", reason="TensorRT is not installed on this machine")
try:
    CUDA = cudart.CudaRuntime()
    CUDA.device_count()
except cudart.CudaUnavailable as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"TensorRT imports but CUDA is unavailable: {exc}", allow_module_level=True)

CAPS = Capabilities.for_version(trt.__version__)
NO_LIBRARIES = ("CUBLAS", "CUBLAS_LT", "CUDNN")
PROFILES = (
    (
        ShapeRange("x", (1, 3, 32, 32), (4, 3, 32, 32), (8, 3, 32, 32)),
        ShapeRange("y", (1, 3, 32, 32), (4, 3, 32, 32), (8, 3, 32, 32)),
    ),
)


def cnn(seed: int) -> bytes:
    """Two dynamic-batch images → two convs → add → relu → strided conv → pool → linear."""
    rng = np.random.default_rng(seed)

    def init(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.normal(0, 0.2, shape).astype(np.float32), name)

    inits = [
        init("w1", (8, 3, 3, 3)),
        init("b1", (8,)),
        init("w2", (8, 3, 3, 3)),
        init("b2", (8,)),
        init("w3", (16, 8, 3, 3)),
        init("b3", (16,)),
        init("w4", (16, 10)),
        init("b4", (10,)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["cx"], pads=[1, 1, 1, 1], name="conv_x"),
        helper.make_node("Conv", ["y", "w2", "b2"], ["cy"], pads=[1, 1, 1, 1], name="conv_y"),
        helper.make_node("Add", ["cx", "cy"], ["s"], name="add"),
        helper.make_node("Relu", ["s"], ["r"], name="relu"),
        helper.make_node(
            "Conv", ["r", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv_down"
        ),
        helper.make_node("Relu", ["c3"], ["r3"], name="relu_down"),
        helper.make_node("GlobalAveragePool", ["r3"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "w4"], ["m"], name="linear"),
        helper.make_node("Add", ["m", "b4"], ["logits"], name="bias"),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 3, 32, 32]) for n in "xy"]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 10])
    graph = helper.make_graph(nodes, "two_input_cnn", inputs, [output], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    data: bytes = model.SerializeToString()
    return data


def feeds(batch: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {n: rng.standard_normal((batch, 3, 32, 32)).astype(np.float32) for n in "xy"}


def reference(model: bytes, inputs: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    result: np.ndarray = session.run(["logits"], inputs)[0]
    return result


def options(**extra: Any) -> BuildOptions:
    return BuildOptions(
        profiles=PROFILES,
        tf32=False,
        disabled_tactic_sources=NO_LIBRARIES,
        workspace_bytes=256 << 20,
        **extra,
    )


@pytest.mark.parametrize(("precision", "tolerance"), [("fp32", 1e-4), ("fp16", 5e-2)])
def test_build_and_infer_on_user_managed_memory_match_onnxruntime(
    precision: str, tolerance: float
) -> None:
    model = cnn(seed=1)
    progress: list[tuple[float, str]] = []
    built = build(
        trt, CAPS, model, options(precision=precision), lambda p, m: progress.append((p, m))
    )
    assert progress[-1][0] == 100.0
    assert built.timing_cache
    engine = load(trt, CAPS, CUDA, built.plan)
    try:
        assert [t.name for t in engine.inputs] == ["x", "y"]
        context = engine.context()
        for batch in (1, 3, 8):
            inputs = feeds(batch)
            got = context.infer(inputs)["logits"]
            np.testing.assert_allclose(
                got, reference(model, inputs), atol=tolerance, rtol=tolerance
            )
    finally:
        engine.close()


def test_refit_replaces_the_weights_in_place() -> None:
    engine = load(trt, CAPS, CUDA, build(trt, CAPS, cnn(seed=1), options(refittable=True)).plan)
    try:
        context = engine.context()
        inputs = feeds()
        np.testing.assert_allclose(
            context.infer(inputs)["logits"], reference(cnn(1), inputs), atol=1e-4, rtol=1e-4
        )
        refit(engine, cnn(seed=2))
        np.testing.assert_allclose(
            context.infer(inputs)["logits"], reference(cnn(2), inputs), atol=1e-4, rtol=1e-4
        )
    finally:
        engine.close()


def test_layer_profile_names_the_models_layers() -> None:
    engine = load(trt, CAPS, CUDA, build(trt, CAPS, cnn(seed=1), options()).plan)
    try:
        layers = profile_layers(engine, feeds(), runs=3, warmups=1)
    finally:
        engine.close()
    names = " ".join(name for name, _ in layers)
    assert "conv_x" in names or "conv_down" in names
    assert all(ms >= 0 for _, ms in layers)
