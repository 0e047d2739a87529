"""TensorRT 10 first-use defects, on the generated stand-in of every release the fix touches
(10.x cannot run on any machine here; the stand-in checks names and arguments, never numbers).
Each test is named after its row and fails on the code before the fix."""

from __future__ import annotations

import pytest

from agent.trt_host import cudart
from agent.trt_host.build import BuildError, BuildOptions, build
from agent.trt_host.engine import EngineError, load
from agent.trt_host.versions import Capabilities
from tests.tensorrt_api.conftest import RecordingCuda
from tests.tensorrt_api.scenes import (
    TWO_INPUTS,
    conv_onnx,
    engine_with_two_inputs,
    feeds,
    network_with_two_dynamic_inputs,
)
from tests.tensorrt_api.standin import VERSIONS, StandIn

pytestmark = pytest.mark.tensorrt_api
TEN = pytest.mark.parametrize("release", ["10.3.0", "10.13.3"])


def build_on(s: StandIn, **options: object) -> tuple[str, ...]:
    network_with_two_dynamic_inputs(s)
    caps = Capabilities.for_version(VERSIONS[s.release])
    opts = BuildOptions(profiles=TWO_INPUTS, **options)  # type: ignore[arg-type]
    return build(s.module, caps, conv_onnx(), opts, lambda p, m: None).notes


@pytest.mark.parametrize("release", ["10.3.0"])  # JetPack 6.1/6.2's; 10.13 (Thor) has no DLA
def test_row1_a_strongly_typed_dla_build_sets_no_fp16_flag(release: str) -> None:
    """TensorRT 10 refuses BuilderFlag.FP16 on a strongly typed network (NVIDIA/TensorRT#4228):
    the DLA path set it anyway, so every strongly typed DLA build failed."""
    s = StandIn(release)
    s.script("Builder.num_DLA_cores", 2)
    build_on(s, strongly_typed=True, dla_core=1)
    flags = [c.args[0] for c in s.recorder.calls("IBuilderConfig.set_flag")]
    assert s.module.BuilderFlag.FP16 not in flags
    assert s.module.BuilderFlag.GPU_FALLBACK in flags
    assert s.recorder.touched("NetworkDefinitionCreationFlag.STRONGLY_TYPED")


@TEN
def test_row1_a_strongly_typed_network_with_a_precision_is_refused_before_building(
    release: str,
) -> None:
    s = StandIn(release)
    with pytest.raises(BuildError, match="takes its types from the ONNX"):
        build_on(s, strongly_typed=True, precision="fp16")
    assert not s.recorder.touched("Builder.build_serialized_network")


@pytest.mark.parametrize("release", ["8.5.2", "8.6.1", "10.3.0", "10.13.3"])
def test_row4_a_refused_timing_cache_is_said_and_the_build_goes_on(release: str) -> None:
    s = StandIn(release)
    s.script("IBuilderConfig.set_timing_cache", False)
    notes = build_on(s, timing_cache=b"a cache from another release")
    assert "TensorRT refused the timing cache (written elsewhere): built without it" in notes
    assert s.recorder.touched("Builder.build_serialized_network")


@pytest.mark.parametrize("release", ["8.5.2", "8.6.1", "10.3.0", "10.13.3"])
def test_row4_a_refused_tensor_address_is_an_error_naming_the_tensor(release: str) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s)
    s.script("IExecutionContext.set_tensor_address", False)
    engine = load(s.module, Capabilities.for_version(VERSIONS[release]), RecordingCuda(), b"plan")
    with pytest.raises(EngineError, match="TensorRT refused the address of tensor 'x'"):
        engine.context().infer(feeds())
    assert not s.recorder.touched("IExecutionContext.execute_async_v3")


def test_row6_thors_cuda_directory_is_searched() -> None:
    assert "/usr/local/cuda/targets/sbsa-linux/lib" in cudart.SEARCH_DIRS


@pytest.mark.parametrize("release", ["8.5.2", "8.6.1", "10.3.0", "10.13.3"])
def test_row3_one_logger_per_process_gives_each_engine_its_own_errors(release: str) -> None:
    """TensorRT keeps the first logger a process gives it (NVIDIA/TensorRT#1475): with a logger
    per engine, the second engine's refusal landed in the first engine's list and read "no
    reason logged". Every Runtime gets the one logger; each failure reads its own words."""
    s = StandIn(release)
    engine_with_two_inputs(s)
    caps = Capabilities.for_version(VERSIONS[release])
    first = load(s.module, caps, RecordingCuda(), b"plan one")
    second = load(s.module, caps, RecordingCuda(), b"plan two")
    loggers = [call.args[0] for call in s.recorder.calls("Runtime.__init__")]
    assert loggers[0] is loggers[1]  # the one logger TensorRT would keep anyway
    kept = loggers[0]
    severity = s.module.ILogger.Severity

    def refuse(words: str) -> object:
        def create(self: object, *args: object, **kwargs: object) -> None:
            kept.log(severity.ERROR, words)  # TensorRT logs to the logger it kept

        return create

    name = (
        "ICudaEngine.create_execution_context_without_device_memory"
        if release.startswith("8.")
        else "ICudaEngine.create_execution_context"
    )
    s.script(name, refuse("second engine: out of device memory"))
    s.script("ICudaEngine.create_execution_context", refuse("second engine: out of device memory"))
    with pytest.raises(EngineError, match="second engine: out of device memory"):
        second.context()
    s.script(name, refuse("first engine: no usable tactic"))
    s.script("ICudaEngine.create_execution_context", refuse("first engine: no usable tactic"))
    with pytest.raises(EngineError) as failed:
        first.context()
    assert "first engine: no usable tactic" in str(failed.value)
    assert "second engine" not in str(failed.value)
