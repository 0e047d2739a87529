"""The stand-in fails as TensorRT does, and the host says so (every failing call in agent/trt_host).

The stand-in refuses argument types pybind11 would not convert, and a test can script the answer
NVIDIA's binding gives when TensorRT fails (``script_failure``: False for a bool, None for a
pointer, -1 for an index). Each failing result the host receives in ``agent/trt_host`` has a test
here, on every release where the call exists, asserting the error a user would see. TensorRT's
logged words reach that error through the one process logger, so each failure also logs one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from agent.trt_host import refit as refit_module
from agent.trt_host.build import BuildError, BuildOptions, build
from agent.trt_host.engine import EngineError, load
from tests.tensorrt_api.conftest import RecordingCuda
from tests.tensorrt_api.scenes import (
    TWO_INPUTS,
    caps_of,
    conv_onnx,
    engine_with_two_inputs,
    feeds,
    network_with_two_dynamic_inputs,
)
from tests.tensorrt_api.standin import RELEASES, StandIn

pytestmark = pytest.mark.tensorrt_api
EVERY = pytest.mark.parametrize("release", RELEASES)
V1 = ("8.5.2", "8.6.1")


def fail_logging(s: StandIn, name: str, words: str) -> None:
    """``name`` answers its failure value after TensorRT logged ``words`` as an error."""
    value = s.script_failure(name)
    trt = s.module

    def failing(self: Any, *args: Any, **kwargs: Any) -> Any:
        loggers = [c.args[0] for c in s.recorder.calls("Runtime.__init__")]
        loggers += [c.args[0] for c in s.recorder.calls("Builder.__init__")]
        loggers[-1].log(trt.ILogger.Severity.ERROR, words)
        return value

    s.script(name, failing)


def build_on(s: StandIn, **options: Any) -> tuple[str, ...]:
    opts = BuildOptions(profiles=TWO_INPUTS, **options)
    return build(s.module, caps_of(s), conv_onnx(), opts, lambda p, m: None).notes


# -- the stand-in itself -------------------------------------------------------------------------
@EVERY
def test_row7_the_standin_refuses_a_wrong_argument_type(release: str) -> None:
    s = StandIn(release)
    trt = s.module
    config = s.make("IBuilderConfig")
    with pytest.raises(TypeError, match="incompatible function arguments") as refused:
        config.set_memory_pool_limit("WORKSPACE", "1GiB")
    assert "(pool: MemoryPoolType, pool_size: int) -> None" in str(refused.value)
    assert s.recorder.events[-1].op == "refused"
    assert not s.recorder.calls("IBuilderConfig.set_memory_pool_limit")
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 30)  # the right types pass
    context = s.make("IExecutionContext")
    with pytest.raises(TypeError, match="incompatible function arguments"):
        context.set_tensor_address("x", "0x7f00")
    with pytest.raises(TypeError, match="incompatible function arguments"):
        context.execute_async_v3(stream_handle=1.5)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        config.set_flag("FP16")
    with pytest.raises(TypeError, match="incompatible function arguments"):
        config.DLA_core = "1"
    if s.present("IExecutionContext", "set_device_memory"):
        with pytest.raises(TypeError, match="incompatible function arguments"):
            context.set_device_memory("x", [1, 2])
        context.set_device_memory(0x10000, 256)


@EVERY
def test_row7_implicit_conversions_and_subclasses_pass_as_in_pybind(release: str) -> None:
    """A tuple or list where a Dims is declared (py::implicitly_convertible), bytes where a
    buffer is, a numpy integer where an int is, a Python subclass of a trampoline class where
    that class is."""
    s = StandIn(release)
    trt = s.module
    s.make("IOptimizationProfile").set_shape("x", min=(1, 3), opt=[2, 3], max=(4, 3))
    s.make("IExecutionContext").set_input_shape("x", (2, 3, 16, 16))
    s.make("Runtime").deserialize_cuda_engine(b"plan")
    s.make("Builder").create_network(np.int64(0))  # numpy integers have __index__

    class Logger(trt.ILogger):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)

        def log(self, severity: Any, msg: str) -> None:
            pass

    trt.Runtime(Logger())
    with pytest.raises(TypeError, match="incompatible function arguments"):
        trt.Runtime("a logger")


@pytest.mark.parametrize(
    ("release", "numbers"),
    [
        ("8.5.2", {"HALF": 1, "INT32": 3, "BOOL": 4, "UINT8": 5}),
        ("10.3.0", {"HALF": 1, "FP8": 6, "BF16": 7, "INT64": 8, "INT4": 9}),
        ("newest", {"FLOAT": 0, "BF16": 7, "INT4": 9, "FP4": 10}),
    ],
)
def test_row7_enum_values_are_nvidias_numbers(release: str, numbers: dict[str, int]) -> None:
    """From NVIDIA's C++ declarations (``kBF16 = 7``), not the order of the Python binding
    (which lists BF16 before INT8 on 10.x)."""
    trt = StandIn(release).module
    assert {name: int(getattr(trt.DataType, name)) for name in numbers} == numbers
    assert int(trt.ILogger.Severity.ERROR) == 1
    assert int(trt.ILogger.Severity.VERBOSE) == 4
    # TensorRT 11 renumbered what it kept after dropping EXPLICIT_BATCH and CUBLAS/CUDNN: the
    # host's bit masks (1 << int(flag)) must follow
    renumbered = release == "newest"
    assert int(trt.TacticSource.EDGE_MASK_CONVOLUTIONS) == (0 if renumbered else 3)
    if release != "8.5.2":  # STRONGLY_TYPED: from 9.1
        assert int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED) == (0 if renumbered else 1)


@EVERY
def test_row7_a_failure_can_only_be_scripted_where_tensorrt_can_fail(release: str) -> None:
    s = StandIn(release)
    assert s.script_failure("IExecutionContext.execute_async_v3") is False
    assert s.script_failure("Runtime.deserialize_cuda_engine") is None
    assert s.script_failure("IBuilderConfig.add_optimization_profile") == -1
    with pytest.raises(ValueError, match="no failure value"):
        s.script_failure("IBuilderConfig.set_flag")  # void: TensorRT answers nothing
    with pytest.raises(KeyError):
        s.script_failure("IExecutionContext.no_such_method")


# -- engine.py -----------------------------------------------------------------------------------
@EVERY
def test_row7_a_plan_tensorrt_refuses_names_tensorrts_words(release: str) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s)
    fail_logging(s, "Runtime.deserialize_cuda_engine", "Serialization assertion failed")
    with pytest.raises(EngineError, match="TensorRT refused the plan: Serialization assertion"):
        load(s.module, caps_of(s), RecordingCuda(), b"plan")


def _user_managed(release: str) -> str:
    return (
        "ICudaEngine.create_execution_context_without_device_memory"
        if release in V1
        else "ICudaEngine.create_execution_context"
    )


@EVERY
def test_row7_no_context_on_user_managed_memory_falls_back_to_tensorrts_own(
    release: str, capsys: pytest.CaptureFixture[str]
) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s)
    engine = load(s.module, caps_of(s), RecordingCuda(), b"plan")
    made = s.make("IExecutionContext")

    def create(self: Any, strategy: Any = None) -> Any:
        return None if strategy is not None else made  # None: the user-managed request

    if release in V1:
        s.script_failure(_user_managed(release))
    s.script("ICudaEngine.create_execution_context", create)
    context = engine.context()
    assert context.ctx is made
    assert engine.self_managed
    assert "could not create an execution context on user-managed memory" in capsys.readouterr().err


@EVERY
def test_row7_no_context_at_all_is_an_error_with_tensorrts_words(release: str) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s)
    engine = load(s.module, caps_of(s), RecordingCuda(), b"plan")
    fail_logging(s, _user_managed(release), "out of device memory")
    if release in V1:
        fail_logging(s, "ICudaEngine.create_execution_context", "out of device memory")
    with pytest.raises(EngineError, match="could not create an execution context: out of device"):
        engine.context()


@EVERY
@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("IExecutionContext.set_input_shape", r"input 'x' shape \(2, 3, 16, 16\) refused by"),
        ("IExecutionContext.set_tensor_address", "TensorRT refused the address of tensor 'x'"),
        ("IExecutionContext.execute_async_v3", "TensorRT execute_async_v3 failed"),
    ],
)
def test_row7_a_refused_run_step_is_an_error_naming_it(release: str, name: str, error: str) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s)
    context = load(s.module, caps_of(s), RecordingCuda(), b"plan").context()
    fail_logging(s, name, "Error Code 3: API Usage Error")
    with pytest.raises(EngineError, match=error) as failed:
        context.infer(feeds())
    assert "Error Code 3: API Usage Error" in str(failed.value)
    assert len(s.recorder.calls(name)) == 1  # nothing after the refusal is tried


@EVERY
def test_row7_a_refused_output_allocator_is_an_error_naming_the_output(release: str) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s)
    s.script("IExecutionContext.get_tensor_shape", lambda self, n: (-1, 3) if n == "out" else (2,))
    context = load(s.module, caps_of(s), RecordingCuda(), b"plan").context()
    fail_logging(s, "IExecutionContext.set_output_allocator", "allocator refused")
    with pytest.raises(EngineError, match="refused an output allocator for 'out': allocator"):
        context.infer(feeds())
    assert not s.recorder.touched("IExecutionContext.execute_async_v3")


# -- refit.py ------------------------------------------------------------------------------------
def _refittable(s: StandIn) -> Any:
    engine_with_two_inputs(s)
    s.script("Refitter.get_all_weights", ["w", "b"])
    s.script("Refitter.get_missing_weights", [])
    return load(s.module, caps_of(s), RecordingCuda(), b"plan")


@EVERY
def test_row7_a_refused_refit_keeps_the_old_weights_and_says_why(release: str) -> None:
    s = StandIn(release)
    engine = _refittable(s)
    fail_logging(s, "Refitter.refit_cuda_engine", "weights of the wrong count")
    with pytest.raises(refit_module.RefitError, match="refit_cuda_engine failed: weights of"):
        refit_module.refit(engine, conv_onnx(seed=1))


@pytest.mark.parametrize("release", ["10.3.0", "10.13.3", "newest"])
def test_row7_an_onnx_the_refitter_refuses_is_an_error_with_the_parsers_words(
    release: str,
) -> None:
    s = StandIn(release)
    engine = _refittable(s)
    s.script_failure("OnnxParserRefitter.refit_from_bytes")
    s.script("OnnxParserRefitter.num_errors", 1)
    s.script("OnnxParserRefitter.get_error", lambda self, i: "node conv: weights w changed shape")
    with pytest.raises(refit_module.RefitError, match=r"topology changed.*weights w changed"):
        refit_module.refit(engine, conv_onnx(seed=1))
    assert not s.recorder.touched("Refitter.refit_cuda_engine")


@pytest.mark.parametrize("release", V1)
def test_row7_refused_named_weights_are_an_error_naming_them(release: str) -> None:
    s = StandIn(release)
    engine = _refittable(s)
    fail_logging(s, "Refitter.set_named_weights", "shape mismatch")
    with pytest.raises(refit_module.RefitError, match="refused weights 'w': shape mismatch"):
        refit_module.refit(engine, conv_onnx(seed=1))
    assert not s.recorder.touched("Refitter.refit_cuda_engine")


# -- build.py ------------------------------------------------------------------------------------
@EVERY
def test_row7_a_model_the_parser_refuses_is_an_error_with_the_parsers_words(release: str) -> None:
    s = StandIn(release)
    network_with_two_dynamic_inputs(s)
    s.script_failure("OnnxParser.parse")
    s.script("OnnxParser.num_errors", 1)
    s.script("OnnxParser.get_error", lambda self, i: "node add: unsupported operator")
    with pytest.raises(BuildError, match="node add: unsupported operator"):
        build_on(s)
    assert not s.recorder.touched("Builder.create_builder_config")


@EVERY
def test_row7_a_rejected_optimization_profile_is_an_error_naming_it(release: str) -> None:
    s = StandIn(release)
    network_with_two_dynamic_inputs(s)
    s.script_failure("IBuilderConfig.add_optimization_profile")
    with pytest.raises(BuildError, match="rejected optimization profile 0"):
        build_on(s)
    assert not s.recorder.touched("Builder.build_serialized_network")


@EVERY
def test_row7_a_failed_build_is_an_error_with_tensorrts_words(release: str) -> None:
    s = StandIn(release)
    network_with_two_dynamic_inputs(s)
    fail_logging(s, "Builder.build_serialized_network", "no implementation for conv")
    with pytest.raises(BuildError, match="no implementation for conv"):
        build_on(s)


@EVERY
def test_row7_a_failed_build_without_a_logged_reason_still_says_so(release: str) -> None:
    s = StandIn(release)
    network_with_two_dynamic_inputs(s)
    s.script_failure("Builder.build_serialized_network")
    with pytest.raises(BuildError, match="build_serialized_network returned None"):
        build_on(s)


@EVERY
def test_row7_a_refused_timing_cache_is_said_and_the_build_goes_on(release: str) -> None:
    s = StandIn(release)
    network_with_two_dynamic_inputs(s)
    s.script_failure("IBuilderConfig.set_timing_cache")
    notes = build_on(s, timing_cache=b"a cache from another device")
    assert "TensorRT refused the timing cache (written elsewhere): built without it" in notes
    assert len(s.recorder.calls("IBuilderConfig.set_timing_cache")) == 2  # then an empty one
    assert s.recorder.touched("Builder.build_serialized_network")


@pytest.mark.parametrize("release", ["8.5.2", "8.6.1", "10.3.0", "10.13.3"])
def test_row7_a_refused_calibration_profile_is_an_error(release: str) -> None:
    s = StandIn(release)
    network_with_two_dynamic_inputs(s)
    s.script_failure("IBuilderConfig.set_calibration_profile")
    number = {"8.5.2": 8502, "8.6.1": 8601, "10.3.0": 100300, "10.13.3": 101303}[release]
    cache = b"TRT-%d-EntropyCalibration2" % number
    with pytest.raises(BuildError, match="TensorRT refused the calibration profile"):
        build_on(s, precision="int8", calibration_cache=cache)
    assert not s.recorder.touched("Builder.build_serialized_network")


@EVERY
def test_row7_refused_tactic_sources_are_an_error_naming_them(release: str) -> None:
    """``set_tactic_sources`` answers False and leaves every source on when TensorRT refuses
    the mask: the build went on with the sources the operator switched off (say, a cuDNN that
    crashes on this device) and said nothing."""
    s = StandIn(release)
    network_with_two_dynamic_inputs(s)
    s.script_failure("IBuilderConfig.set_tactic_sources")
    with pytest.raises(BuildError, match=r"TensorRT refused to switch off tactic sources \['E"):
        build_on(s, disabled_tactic_sources=("EDGE_MASK_CONVOLUTIONS",))
    assert not s.recorder.touched("Builder.build_serialized_network")
