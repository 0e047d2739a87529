"""The build path of the TensorRT host per release, against the generated stand-in.

Asserts which names each release's path touched (never numbers): the explicit-batch flag only on
8.x, one profile for two dynamic inputs with its result checked, progress through IProgressMonitor
only where it exists, precision/DLA/INT8/refit/tactic options through names of that release.
"""

from __future__ import annotations

import pytest

from agent.trt_host.build import BuildError, BuildOptions, build
from agent.trt_host.versions import Capabilities
from tests.tensorrt_api.scenes import TWO_INPUTS, conv_onnx, network_with_two_dynamic_inputs
from tests.tensorrt_api.standin import StandIn

pytestmark = pytest.mark.tensorrt_api


def run(s: StandIn, caps: Capabilities, **options: object) -> list[tuple[float, str]]:
    network_with_two_dynamic_inputs(s)
    progress: list[tuple[float, str]] = []
    opts = BuildOptions(profiles=TWO_INPUTS, **options)  # type: ignore[arg-type]
    result = build(s.module, caps, conv_onnx(), opts, lambda p, m: progress.append((p, m)))
    assert result.plan
    return progress


def test_fp32_build_with_two_dynamic_inputs_takes_this_releases_path(
    standin: StandIn, caps: Capabilities, release: str
) -> None:
    progress = run(standin, caps, timing_cache=b"old cache")
    rec = standin.recorder
    assert rec.touched("NetworkDefinitionCreationFlag.EXPLICIT_BATCH") == release.startswith("8.")
    assert not rec.touched("NetworkDefinitionCreationFlag.STRONGLY_TYPED")
    assert len(rec.calls("Builder.create_optimization_profile")) == 1
    assert [c.args[0] for c in rec.calls("IOptimizationProfile.set_shape")] == ["x", "y"]
    assert len(rec.calls("IBuilderConfig.add_optimization_profile")) == 1
    assert rec.calls("IBuilderConfig.clear_flag")[0].args == (standin.module.BuilderFlag.TF32,)
    assert rec.calls("IBuilderConfig.create_timing_cache")[0].args == (b"old cache",)
    assert rec.touched("ITimingCache.serialize")
    assert rec.touched("IBuilderConfig.progress_monitor") == caps.progress_monitor
    assert rec.touched("IProgressMonitor") == (release not in ("8.5.2", "8.6.1"))
    assert not rec.touched("IBuilderConfig.builder_optimization_level")
    assert not rec.calls("IBuilderConfig.set_flag")
    assert progress[-1][0] == 100.0
    assert not [e for e in rec.events if e.op == "missing"]
    assert not (rec.names() & standin.deprecated_names())


def test_optimization_level_and_aux_streams_only_where_they_exist(
    standin: StandIn, caps: Capabilities, release: str
) -> None:
    run(standin, caps, optimization_level=3, max_aux_streams=0)
    rec = standin.recorder
    assert rec.touched("IBuilderConfig.builder_optimization_level") == (release != "8.5.2")
    assert rec.touched("IBuilderConfig.max_aux_streams") == (release != "8.5.2")
    assert not [e for e in rec.events if e.op == "missing"]


def test_fp16_where_weak_typing_exists_else_a_clear_error(
    standin: StandIn, caps: Capabilities, release: str
) -> None:
    if release == "newest":
        with pytest.raises(BuildError, match="strongly typed"):
            run(standin, caps, precision="fp16")
        assert not standin.recorder.touched("BuilderFlag.FP16")
        return
    run(standin, caps, precision="fp16")
    flags = [c.args[0] for c in standin.recorder.calls("IBuilderConfig.set_flag")]
    assert flags == [standin.module.BuilderFlag.FP16]


def test_int8_from_a_calibration_cache(standin: StandIn, caps: Capabilities, release: str) -> None:
    # the header this release writes (another release's cache is refused)
    number = {"8.5.2": 8502, "8.6.1": 8601, "10.3.0": 100300, "10.13.3": 101303, "newest": 110100}
    cache = b"TRT-%d-EntropyCalibration2" % number[release]
    if release == "newest":
        with pytest.raises(BuildError, match="strongly typed"):
            run(standin, caps, precision="int8", calibration_cache=cache)
        assert not standin.recorder.touched("IInt8EntropyCalibrator2")
        return
    run(standin, caps, precision="int8", calibration_cache=cache)
    rec = standin.recorder
    calibrator = rec.sets("IBuilderConfig.int8_calibrator")[0].args[0]
    assert calibrator.read_calibration_cache() == cache
    assert calibrator.get_batch(["x", "y"]) is None
    assert rec.touched("IBuilderConfig.set_calibration_profile")
    assert rec.calls("IBuilderConfig.set_flag")[0].args == (standin.module.BuilderFlag.INT8,)


def test_a_quantized_network_is_built_with_int8_where_weak_typing_exists(
    standin: StandIn, caps: Capabilities, release: str
) -> None:
    """Q/DQ layers in a weakly typed network need BuilderFlag.INT8 whatever the config's
    precision (real 8.5.2 and 8.6.0 refused a symmetric QDQ model without it)."""
    network_with_two_dynamic_inputs(standin, layer_types=("QUANTIZE", "CONVOLUTION", "DEQUANTIZE"))
    result = build(standin.module, caps, conv_onnx(), BuildOptions(profiles=TWO_INPUTS))
    flags = [c.args for c in standin.recorder.calls("IBuilderConfig.set_flag")]
    if caps.always_strongly_typed:  # types come from the network: no precision flags at all
        assert flags == []
        return
    assert flags == [(standin.module.BuilderFlag.INT8,)]
    assert "INT8 enabled" in " ".join(result.notes)


def test_dla_core_with_gpu_fallback(standin: StandIn, caps: Capabilities, release: str) -> None:
    if not caps.dla:
        with pytest.raises(BuildError, match="no DLA support"):
            run(standin, caps, dla_core=1)
        assert not standin.recorder.touched("IBuilderConfig.DLA_core")
        return
    run(standin, caps, dla_core=1)
    rec = standin.recorder
    assert rec.sets("IBuilderConfig.default_device_type")[0].args == (
        standin.module.DeviceType.DLA,
    )
    assert rec.sets("IBuilderConfig.DLA_core")[0].args == (1,)
    flags = [c.args[0] for c in rec.calls("IBuilderConfig.set_flag")]
    assert standin.module.BuilderFlag.GPU_FALLBACK in flags
    assert standin.module.BuilderFlag.FP16 in flags


def test_dla_core_beyond_the_devices_cores_is_refused(standin: StandIn, caps: Capabilities) -> None:
    with pytest.raises(BuildError):
        run(standin, caps, dla_core=5)
    assert not standin.recorder.touched("IBuilderConfig.DLA_core")


def test_refittable_engine_sets_builder_flag_refit(standin: StandIn, caps: Capabilities) -> None:
    run(standin, caps, refittable=True)
    flags = [c.args[0] for c in standin.recorder.calls("IBuilderConfig.set_flag")]
    assert flags == [standin.module.BuilderFlag.REFIT]


def test_tactic_sources_switched_off_by_name(
    standin: StandIn, caps: Capabilities, release: str
) -> None:
    run(standin, caps, disabled_tactic_sources=("CUBLAS", "CUBLAS_LT", "CUDNN"))
    rec = standin.recorder
    assert rec.touched("IBuilderConfig.set_tactic_sources")
    assert rec.touched("TacticSource.CUDNN") == (release != "newest")
    assert not [e for e in rec.events if e.op == "missing"]


def test_a_profile_that_misses_a_dynamic_input_is_refused_before_building(
    standin: StandIn, caps: Capabilities
) -> None:
    network_with_two_dynamic_inputs(standin)
    with pytest.raises(BuildError, match="dynamic input"):
        build(standin.module, caps, conv_onnx(), BuildOptions(profiles=(TWO_INPUTS[0][:1],)))
    assert not standin.recorder.touched("Builder.build_serialized_network")


def test_a_rejected_profile_fails_the_build(standin: StandIn, caps: Capabilities) -> None:
    network_with_two_dynamic_inputs(standin, profile_index=-1)
    with pytest.raises(BuildError, match="rejected optimization profile"):
        build(standin.module, caps, conv_onnx(), BuildOptions(profiles=TWO_INPUTS))
    assert not standin.recorder.touched("Builder.build_serialized_network")


def test_parser_errors_are_the_failure(standin: StandIn, caps: Capabilities) -> None:
    network_with_two_dynamic_inputs(standin)
    standin.script("OnnxParser.parse", False)
    standin.script("OnnxParser.num_errors", 1)
    standin.script("OnnxParser.get_error", lambda self, i: "In node 0 (Conv): bad weights")
    with pytest.raises(BuildError, match="bad weights"):
        build(standin.module, caps, b"onnx", BuildOptions(profiles=TWO_INPUTS))


@pytest.mark.parametrize("release", ["8.5.2", "8.6.1"])
def test_8x_progress_is_a_heartbeat_of_the_loggers_messages(
    standin: StandIn, caps: Capabilities
) -> None:
    network_with_two_dynamic_inputs(standin)
    trt = standin.module

    def build_and_log(self: object, network: object, config: object) -> object:
        logger = standin.recorder.calls("Builder.__init__")[0].args[0]
        logger.log(trt.ILogger.Severity.VERBOSE, "Timing Runner: /conv/Conv (CaskConvolution)")
        return standin._new("IHostMemory")

    standin.script("Builder.build_serialized_network", build_and_log)
    progress: list[tuple[float, str]] = []
    options = BuildOptions(profiles=TWO_INPUTS)
    build(trt, caps, conv_onnx(), options, lambda p, m: progress.append((p, m)), heartbeat_s=0)
    assert any("Timing Runner: /conv/Conv" in m for _, m in progress)


@pytest.mark.parametrize("release", ["10.3.0", "10.13.3", "newest"])
def test_progress_monitor_phases_become_percentages(standin: StandIn, caps: Capabilities) -> None:
    network_with_two_dynamic_inputs(standin)
    progress: list[tuple[float, str]] = []
    options = BuildOptions(profiles=TWO_INPUTS)
    build(standin.module, caps, conv_onnx(), options, lambda p, m: progress.append((p, m)))
    monitor = standin.recorder.sets("IBuilderConfig.progress_monitor")[0].args[0]
    monitor.phase_start("Building engine", None, 4)
    monitor.phase_start("Tactic timing", "Building engine", 100)
    assert monitor.step_complete("Tactic timing", 3)
    assert monitor.step_complete("Building engine", 1)
    monitor.phase_finish("Building engine")
    assert [m for _, m in progress].count("Building engine") == 1
    assert 2.0 < progress[-1][0] < 100.0


def _static_network(s: StandIn, out_shape: tuple[int, ...], shape_input: bool = False) -> None:
    """A network whose one input is static; its output is ``out_shape`` (-1: data-dependent)."""
    image = s.make("ITensor", name="images", shape=(1, 3, 64, 64), is_shape_tensor=shape_input)
    out = s.make("ITensor", name="boxes", shape=out_shape)
    s.script("OnnxParser.parse", True)
    s.script("INetworkDefinition.num_inputs", 1)
    s.script("INetworkDefinition.get_input", lambda self, i: image)
    s.script("INetworkDefinition.num_outputs", 1)
    s.script("INetworkDefinition.get_output", lambda self, i: out)
    s.script("IBuilderConfig.add_optimization_profile", 0)


def test_a_static_network_with_data_dependent_outputs_gets_a_profile_of_its_own_shapes(
    standin: StandIn, caps: Capabilities
) -> None:
    # Real 8.5.2 refused a static NonMaxSuppression detector without any profile ("need profile")
    _static_network(standin, (-1, 4))
    build(standin.module, caps, conv_onnx(), BuildOptions())
    shapes = standin.recorder.calls("IOptimizationProfile.set_shape")
    assert [(c.args, c.kwargs) for c in shapes] == [
        (("images",), {"min": (1, 3, 64, 64), "opt": (1, 3, 64, 64), "max": (1, 3, 64, 64)})
    ]
    assert len(standin.recorder.calls("IBuilderConfig.add_optimization_profile")) == 1


@pytest.mark.parametrize(("out_shape", "shape_input"), [((1, 4), False), ((-1, 4), True)])
def test_other_static_networks_get_no_profile(
    standin: StandIn, caps: Capabilities, out_shape: tuple[int, ...], shape_input: bool
) -> None:
    _static_network(standin, out_shape, shape_input)
    build(standin.module, caps, conv_onnx(), BuildOptions())
    assert standin.recorder.calls("IOptimizationProfile.set_shape") == []
