"""Deprecated names and untested TensorRT 10 paths, on the generated stand-in of each release
where the path exists.

Deprecations: what is deprecated and what warns (NVIDIA's sources, checked at v10.3.0 and v10.13.3):

- ``BuilderFlag.FP16``/``INT8`` are deprecated in 10.12 ("Superseded by strong typing") by their
  docstrings only: an enum value cannot warn, so touching them emits nothing;
- ``IBuilderConfig.int8_calibrator`` and ``set_calibration_profile`` are deprecated since 10.1
  (the table marks them ``d`` at 10.3.0 already, not only at 10.13) through
  ``utils::deprecateMember``, which calls ``PyErr_WarnEx(PyExc_DeprecationWarning, ..., 1)``:
  the warning is attributed to the calling frame, ``agent.trt_host.build``, and Python's default
  filters show a DeprecationWarning only when it is attributed to ``__main__`` (checked with
  ``PyErr_WarnEx`` through ctypes under Python 3.11: silent by default, shown under
  ``-W default``). Neither the host nor the build child sets a filter, so nothing reaches the
  agent's log and the build wraps nothing in ``warnings.catch_warnings()`` (the stand-in emits
  no warnings; it reports deprecated names through ``deprecated_names()``).

So a weakly typed fp16/int8 build still works on 10.x; its notes say what is deprecated on this
release and what replaces it (strong typing, Q/DQ).

Untested paths: the 10.x paths no test took (each asserts the names and arguments it touched).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.trt_host.backend_trt import TrtBackend, TrtModel
from agent.trt_host.build import BuildError, BuildOptions, BuildResult, build
from agent.trt_host.refit import RefitError
from agent.trt_host.versions import MEMORY_V2, Capabilities
from tests.tensorrt_api.conftest import RecordingCuda
from tests.tensorrt_api.scenes import (
    TWO_INPUTS,
    conv_onnx,
    engine_with_two_inputs,
    feeds,
    network_with_two_dynamic_inputs,
)
from tests.tensorrt_api.standin import RELEASES, VERSIONS, StandIn

pytestmark = pytest.mark.tensorrt_api

WEAKLY_TYPED = ("8.5.2", "8.6.1", "10.3.0", "10.13.3")  # newest refuses fp16/int8 (strong only)
ONNX_REFIT = ("10.3.0", "10.13.3", "newest")
DLA = [r for r in RELEASES if Capabilities.for_version(VERSIONS[r]).dla]
CALIBRATION = {"IBuilderConfig.int8_calibrator", "IBuilderConfig.set_calibration_profile"}


def caps_of(s: StandIn) -> Capabilities:
    return Capabilities.for_version(VERSIONS[s.release])


def build_on(s: StandIn, **options: object) -> BuildResult:
    network_with_two_dynamic_inputs(s)
    opts = BuildOptions(profiles=TWO_INPUTS, **options)  # type: ignore[arg-type]
    return build(s.module, caps_of(s), conv_onnx(), opts, lambda p, m: None)


def calibration_cache(release: str) -> bytes:
    """A cache as TensorRT of ``release`` writes it: ``TRT-8502-…`` on 8.x (NV_TENSORRT_VERSION =
    major*1000 + minor*100 + patch), ``TRT-100300-…`` from 10.0 (major*10000 + …)."""
    major, minor, patch = Capabilities.for_version(VERSIONS[release]).version
    number = (major * (1000 if major < 10 else 10000)) + minor * 100 + patch
    return b"TRT-%d-EntropyCalibration2\nx: 3c010204\ny: 3c010204\n" % number


def deprecated_touched(s: StandIn) -> set[str]:
    return s.recorder.names() & s.deprecated_names()


def plan_file(tmp_path: Path) -> str:
    path = tmp_path / "model.plan"
    path.write_bytes(b"plan bytes")
    return str(path)


# -- deprecations ------------------------------------------------------------------------


def test_row5_deprecation_capabilities_agree_with_the_api_table(
    standin: StandIn, caps: Capabilities
) -> None:
    deprecated = standin.deprecated_names()
    assert caps.precision_flags_deprecated == ("BuilderFlag.FP16" in deprecated)
    assert caps.precision_flags_deprecated == ("BuilderFlag.INT8" in deprecated)
    assert caps.calibration_deprecated == (deprecated >= CALIBRATION)


@pytest.mark.parametrize("release", WEAKLY_TYPED)
def test_row5_a_weakly_typed_fp16_build_works_and_says_where_its_flag_is_deprecated(
    release: str,
) -> None:
    s = StandIn(release)
    notes = " ".join(build_on(s, precision="fp16").notes)
    assert s.recorder.calls("Builder.build_serialized_network")
    flags = [c.args[0] for c in s.recorder.calls("IBuilderConfig.set_flag")]
    assert flags == [s.module.BuilderFlag.FP16]
    assert deprecated_touched(s) == ({"BuilderFlag.FP16"} if release == "10.13.3" else set())
    if release == "10.13.3":
        assert "BuilderFlag.FP16 is deprecated in TensorRT 10.13.3" in notes
        assert "strongly typed" in notes
    else:
        assert "deprecated" not in notes


@pytest.mark.parametrize("release", WEAKLY_TYPED)
def test_row5_an_int8_build_from_a_cache_works_and_says_what_is_deprecated(release: str) -> None:
    """8.x: nothing deprecated. 10.3.0: the calibrator (deprecated since 10.1, it warns), not the
    flag. 10.13.3: the calibrator and BuilderFlag.INT8 (deprecated since 10.12)."""
    s = StandIn(release)
    result = build_on(s, precision="int8", calibration_cache=calibration_cache(release))
    notes = " ".join(result.notes)
    rec = s.recorder
    assert rec.calls("Builder.build_serialized_network")
    assert rec.sets("IBuilderConfig.int8_calibrator")
    assert rec.calls("IBuilderConfig.set_flag")[0].args == (s.module.BuilderFlag.INT8,)
    touched = deprecated_touched(s)
    calibrator_class = {n for n in touched if n.startswith("IInt8")}  # the subclassed trampoline
    expected = {"8.5.2": set(), "8.6.1": set(), "10.3.0": CALIBRATION}.get(
        release, CALIBRATION | {"BuilderFlag.INT8"}
    )
    assert touched - calibrator_class == expected
    assert bool(calibrator_class) == release.startswith("10.")
    if release.startswith("8."):
        assert "deprecated" not in notes
        return
    assert "INT8 calibration (int8_calibrator, set_calibration_profile) is deprecated" in notes
    assert "Q/DQ" in notes
    assert ("BuilderFlag.INT8 is deprecated in TensorRT 10.13.3" in notes) == (release == "10.13.3")


def test_row5_the_fp32_path_touches_nothing_deprecated_and_says_nothing(
    standin: StandIn,
) -> None:
    result = build_on(standin)
    assert not deprecated_touched(standin)
    assert not [n for n in result.notes if "deprecated" in n]


# -- untested 10.x paths -----------------------------------------------------------------


def test_row8_a_strongly_typed_build_sets_the_network_flag_and_no_precision_flag(
    standin: StandIn, caps: Capabilities, release: str
) -> None:
    rec, trt = standin.recorder, standin.module
    if release.startswith("8."):
        with pytest.raises(BuildError, match=r"strongly typed networks need TensorRT >= 9\.1"):
            build_on(standin, strongly_typed=True)
        assert not rec.touched("Builder.create_network")
        return
    build_on(standin, strongly_typed=True)
    assert rec.calls("Builder.build_serialized_network")
    if caps.strongly_typed_flag:  # 10.x
        flag = trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED
        assert rec.calls("Builder.create_network")[0].args == (1 << int(flag),)
    else:  # 11.x: every network is strongly typed, the flag is deprecated there
        assert not rec.touched("NetworkDefinitionCreationFlag.STRONGLY_TYPED")
    assert not rec.calls("IBuilderConfig.set_flag")
    assert not {n for n in rec.names() if n.startswith("BuilderFlag.")} - {"BuilderFlag.TF32"}
    assert not rec.touched("IBuilderConfig.int8_calibrator")
    assert not deprecated_touched(standin)
    assert not [e for e in rec.events if e.op == "missing"]


def refitting_backend(s: StandIn, tmp_path: Path) -> tuple[TrtBackend, TrtModel, str]:
    engine_with_two_inputs(s)
    s.script("Refitter.get_missing_weights", [])
    backend = TrtBackend(s.module, caps_of(s), RecordingCuda())
    model = backend.load(plan_file(tmp_path), {})
    assert set(backend.infer(model, feeds())) == {"out"}
    onnx = tmp_path / "v2.onnx"
    onnx.write_bytes(conv_onnx(seed=1))
    return backend, model, str(onnx)


@pytest.mark.parametrize("release", ONNX_REFIT)
def test_row8_a_failed_onnx_refit_raises_tensorrts_words_and_the_engine_keeps_serving(
    release: str, tmp_path: Path
) -> None:
    s = StandIn(release)
    severity = s.module.ILogger.Severity

    def refuse(self: object) -> bool:
        logger = s.recorder.calls("Refitter.__init__")[-1].args[1]
        logger.log(severity.ERROR, "IRefitter::refitCudaEngine: Error Code 3: weights mismatch")
        return False

    s.script("OnnxParserRefitter.refit_from_bytes", True)
    s.script("Refitter.refit_cuda_engine", refuse)
    backend, model, onnx = refitting_backend(s, tmp_path)
    with pytest.raises(
        RefitError, match=r"refit_cuda_engine failed: .*Error Code 3: weights mismatch"
    ):
        backend.refit(model, onnx)
    rec = s.recorder
    assert rec.calls("OnnxParserRefitter.refit_from_bytes")[0].args == (conv_onnx(seed=1),)
    assert not rec.touched("Refitter.set_named_weights")
    assert set(backend.infer(model, feeds())) == {"out"}
    assert len(rec.calls("IExecutionContext.execute_async_v3")) == 2
    assert not [e for e in rec.events if e.op == "missing"]


@pytest.mark.parametrize("release", ONNX_REFIT)
def test_row8_an_onnx_the_parser_refitter_refuses_is_a_refit_error_with_its_words(
    release: str, tmp_path: Path
) -> None:
    s = StandIn(release)
    s.script("OnnxParserRefitter.refit_from_bytes", False)
    s.script("OnnxParserRefitter.num_errors", 1)
    s.script("OnnxParserRefitter.get_error", lambda self, i: "initializer 'w' has another shape")
    backend, model, onnx = refitting_backend(s, tmp_path)
    with pytest.raises(RefitError, match=r"topology changed.*initializer 'w' has another shape"):
        backend.refit(model, onnx)
    assert not s.recorder.touched("Refitter.refit_cuda_engine")
    assert set(backend.infer(model, feeds())) == {"out"}


@pytest.mark.parametrize("release", DLA)
def test_row8_a_dla_engine_is_deserialized_on_its_core(release: str, tmp_path: Path) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s)
    backend = TrtBackend(s.module, caps_of(s), RecordingCuda())
    model = backend.load(plan_file(tmp_path), {"dla_core": 1})
    events = s.recorder.events
    core = [i for i, e in enumerate(events) if e.op == "set" and e.name == "Runtime.DLA_core"]
    loaded = [i for i, e in enumerate(events) if e.name == "Runtime.deserialize_cuda_engine"]
    assert [events[i].args for i in core] == [(1,)]
    assert core[0] < loaded[0]  # the core is chosen before the plan is read
    assert set(backend.infer(model, feeds())) == {"out"}
    assert not deprecated_touched(s)


@pytest.mark.parametrize("release", DLA)
def test_row8_dla_without_gpu_fallback_sets_direct_io(release: str) -> None:
    s = StandIn(release)
    s.script("Builder.num_DLA_cores", 2)
    build_on(s, dla_core=0, gpu_fallback=False)
    rec, flag = s.recorder, s.module.BuilderFlag
    assert rec.sets("IBuilderConfig.default_device_type")[0].args == (s.module.DeviceType.DLA,)
    assert rec.sets("IBuilderConfig.DLA_core")[0].args == (0,)
    flags = [c.args[0] for c in rec.calls("IBuilderConfig.set_flag")]
    assert flags == [flag.FP16, flag.DIRECT_IO]  # FP16: a weakly typed DLA network needs one
    assert not rec.touched("BuilderFlag.GPU_FALLBACK")
    assert not deprecated_touched(s)


def test_row8_the_workspace_is_a_memory_pool_limit(standin: StandIn) -> None:
    build_on(standin, workspace_bytes=3 << 29)
    rec = standin.recorder
    calls = rec.calls("IBuilderConfig.set_memory_pool_limit")
    assert [c.args for c in calls] == [(standin.module.MemoryPoolType.WORKSPACE, 3 << 29)]
    assert type(calls[0].args[1]) is int
    assert not calls[0].kwargs
    assert not rec.touched("IBuilderConfig.max_workspace_size")
    assert not deprecated_touched(standin)


def test_row8_contexts_rebind_their_memory_after_the_arena_grows(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda, tmp_path: Path
) -> None:
    engine_with_two_inputs(standin)  # 1 MiB of activation memory
    backend = TrtBackend(standin.module, caps, cuda)
    small = backend.load(plan_file(tmp_path), {"streams": 1})
    backend.infer(small, feeds())
    assert backend.arena is not None
    with backend.arena.lane() as lane:
        before = (lane.ptr, lane.size)
    for name in ("ICudaEngine.device_memory_size", "ICudaEngine.device_memory_size_v2"):
        standin.script(name, 200 << 20)
    large = backend.load(plan_file(tmp_path), {})  # the arena grows: new regions
    with backend.arena.lane() as lane:
        after = (lane.ptr, lane.size)
    assert after[0] != before[0]
    assert after[1] >= 200 << 20
    assert ("free", (before[0],)) in cuda.calls
    backend.infer(small, feeds())  # the small model's context must leave the freed region
    backend.infer(small, feeds())  # same generation: no second rebind
    rec = standin.recorder
    if caps.memory_mode == MEMORY_V2:
        binds = [c.args for c in rec.calls("IExecutionContext.set_device_memory")]
        assert binds == [before, after]
        assert not rec.sets("IExecutionContext.device_memory")
    else:
        assert [e.args for e in rec.sets("IExecutionContext.device_memory")] == [
            (before[0],),
            (after[0],),
        ]
        assert not rec.touched("IExecutionContext.set_device_memory")
    backend.infer(large, feeds())
    assert not deprecated_touched(standin)
