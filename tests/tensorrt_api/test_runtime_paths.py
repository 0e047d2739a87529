"""Deserialize, user-managed activation memory, infer, refit and layer profile per release.

Asserts the path (which names of each release were touched), never a number. CUDA is the
RecordingCuda of conftest.py (the suite's one non-TensorRT stand-in).
"""

from __future__ import annotations

import pytest

from agent.trt_host import refit as refit_module
from agent.trt_host.dtypes import UnsupportedDType
from agent.trt_host.engine import EngineError, load
from agent.trt_host.profiler import profile_layers
from agent.trt_host.versions import Capabilities
from tests.tensorrt_api.conftest import RecordingCuda, is_named_kind
from tests.tensorrt_api.scenes import conv_onnx, engine_with_two_inputs, feeds
from tests.tensorrt_api.standin import StandIn

pytestmark = pytest.mark.tensorrt_api

V1 = ("8.5.2", "8.6.1")


def test_context_on_user_managed_memory_and_inference(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda, release: str
) -> None:
    engine_with_two_inputs(standin)
    engine = load(standin.module, caps, cuda, b"plan bytes")
    context = engine.context()
    outputs = context.infer(feeds())
    rec = standin.recorder
    assert set(outputs) == {"out"}
    assert [t.name for t in engine.inputs] == ["x", "y"]
    if release in V1:
        assert rec.touched("ICudaEngine.create_execution_context_without_device_memory")
        assert rec.sets("IExecutionContext.device_memory")
        assert rec.touched("ICudaEngine.device_memory_size")
        assert not rec.touched("ICudaEngine.create_execution_context")
    else:
        created = rec.calls("ICudaEngine.create_execution_context")
        strategy = standin.module.ExecutionContextAllocationStrategy.USER_MANAGED
        assert created[0].kwargs == {"strategy": strategy}
        assert rec.calls("IExecutionContext.set_device_memory")
        assert rec.touched("ICudaEngine.device_memory_size_v2")
        assert not rec.touched("ICudaEngine.create_execution_context_without_device_memory")
        assert not rec.touched("ICudaEngine.device_memory_size")
    assert [c.args[0] for c in rec.calls("IExecutionContext.set_input_shape")] == ["x", "y"]
    assert rec.calls("IExecutionContext.execute_async_v3")[0].kwargs == {"stream_handle": 0xBEEF}
    assert len(cuda.copy_kinds()) == 3
    assert all(is_named_kind(kind) for kind in cuda.copy_kinds())
    assert not [e for e in rec.events if e.op == "missing"]
    assert not (rec.names() & standin.deprecated_names())
    engine.close()
    assert ("stream_destroy", (0xBEEF,)) in cuda.calls


def test_8_5_2_touches_no_10x_memory_api(cuda: RecordingCuda) -> None:
    standin = StandIn("8.5.2")
    engine_with_two_inputs(standin)
    load(standin.module, Capabilities.for_version("8.5.2"), cuda, b"plan").context().infer(feeds())
    for name in (
        "ICudaEngine.device_memory_size_v2",
        "IExecutionContext.set_device_memory",
        "ExecutionContextAllocationStrategy",
        "IProgressMonitor",
    ):
        assert not standin.recorder.touched(name)


def test_refused_input_shape_raises_with_tensorrts_words(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda
) -> None:
    engine_with_two_inputs(standin, set_shape_ok=False)
    context = load(standin.module, caps, cuda, b"plan").context()
    with pytest.raises(EngineError, match="setInputShape: Error Code 3"):
        context.infer(feeds())
    assert not standin.recorder.touched("IExecutionContext.execute_async_v3")


def test_a_refused_plan_raises_with_tensorrts_words(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda
) -> None:
    trt = standin.module

    def refuse(self: object, plan: bytes) -> None:
        logger = standin.recorder.calls("Runtime.__init__")[-1].args[0]
        logger.log(trt.ILogger.Severity.ERROR, "Serialization assertion failed: magic tag")

    standin.script("Runtime.deserialize_cuda_engine", refuse)
    with pytest.raises(EngineError, match="magic tag"):
        load(trt, caps, cuda, b"plan")


def test_a_plan_from_a_newer_tensorrt_is_refused_before_deserializing_on_every_release(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda
) -> None:
    """8.5's own plans start ``ptrt`` and never read as a version (seen on real 8.5.2), so even
    8.5 can refuse a plan whose header names 9.9 instead of handing it to TensorRT."""
    plan = b"ftrt\x00\x00\x00\x00" + bytes(16) + bytes((9, 9, 9, 9)) + bytes(64)
    with pytest.raises(EngineError, match="rebuild the engine"):
        load(standin.module, caps, cuda, plan)
    assert not standin.recorder.touched("Runtime.deserialize_cuda_engine")


def test_types_numpy_cannot_hold_are_a_clear_error(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda, release: str
) -> None:
    wide = "BF16" if "BF16" in caps.dtypes else "FP8" if "FP8" in caps.dtypes else None
    engine_with_two_inputs(standin, dtype=wide or "INT8")
    if wide is None:
        assert load(standin.module, caps, cuda, b"plan").outputs[0].dtype.name == "int8"
        return
    with pytest.raises(UnsupportedDType, match=f"{wide} of tensor 'out'"):
        load(standin.module, caps, cuda, b"plan")
    assert not standin.recorder.touched("nptype")


def test_refit_from_new_onnx_weights(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda, release: str
) -> None:
    engine_with_two_inputs(standin)
    standin.script("Refitter.get_all_weights", ["w", "b"])
    standin.script("Refitter.get_missing_weights", [])
    standin.script("Refitter.refit_cuda_engine", True)
    standin.script("Refitter.set_named_weights", True)
    standin.script("OnnxParserRefitter.refit_from_bytes", True)
    engine = load(standin.module, caps, cuda, b"plan")
    refit_module.refit(engine, conv_onnx(seed=1))
    rec = standin.recorder
    assert rec.calls("Refitter.refit_cuda_engine")
    if release in V1:
        named = rec.calls("Refitter.set_named_weights")
        assert [c.args[0] for c in named] == ["w", "b"]
        assert not rec.touched("OnnxParserRefitter")
    else:
        assert rec.calls("OnnxParserRefitter.refit_from_bytes")
        assert not rec.calls("Refitter.set_named_weights")
    assert not [e for e in rec.events if e.op == "missing"]


def test_refit_with_weights_the_onnx_lacks_is_refused(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda
) -> None:
    engine_with_two_inputs(standin)
    standin.script("Refitter.get_all_weights", ["w", "b", "folded_bn_scale"])
    standin.script("Refitter.get_missing_weights", ["folded_bn_scale"])
    standin.script("Refitter.set_named_weights", True)
    standin.script("OnnxParserRefitter.refit_from_bytes", True)
    engine = load(standin.module, caps, cuda, b"plan")
    with pytest.raises(refit_module.RefitError, match="folded_bn_scale"):
        refit_module.refit(engine, conv_onnx(seed=1))
    assert not standin.recorder.touched("Refitter.refit_cuda_engine")


def test_layer_profile_through_iprofiler(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda
) -> None:
    engine_with_two_inputs(standin)
    engine = load(standin.module, caps, cuda, b"plan")
    layers = profile_layers(engine, feeds(), runs=3, warmups=1)
    assert [name for name, _ in layers] == ["/conv/Conv + /relu/Relu"] * 3
    assert standin.recorder.sets("IExecutionContext.profiler")
    assert not engine.contexts
