"""The host's TensorRT backend (agent/trt_host/backend_trt.py) per release, against the stand-in.

What the agent's TensorRT slots run through: load a plan with the slot's streams on the shared
activation arena, describe I/O, infer, refit, profile, unload, and build from the plain options
the agent sends. Asserts the path (names touched, CUDA calls made), never a number.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agent.trt_host.backend_trt import TrtBackend, build_options
from agent.trt_host.build import BuildError
from agent.trt_host.versions import Capabilities
from tests.tensorrt_api.conftest import RecordingCuda, is_named_kind
from tests.tensorrt_api.scenes import (
    conv_onnx,
    engine_with_two_inputs,
    feeds,
    network_with_two_dynamic_inputs,
)
from tests.tensorrt_api.standin import StandIn

pytestmark = pytest.mark.tensorrt_api

V1 = ("8.5.2", "8.6.1")
PROFILE = [
    [
        {"input": "x", "min": [1, 3, 16, 16], "opt": [2, 3, 16, 16], "max": [4, 3, 16, 16]},
        {"input": "y", "min": [1, 3, 16, 16], "opt": [2, 3, 16, 16], "max": [4, 3, 16, 16]},
    ]
]


def plan_file(tmp_path: Path) -> str:
    path = tmp_path / "model.plan"
    path.write_bytes(b"plan bytes")
    return str(path)


def test_load_infer_unload_on_the_arena_take_this_releases_path(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda, release: str, tmp_path: Path
) -> None:
    engine_with_two_inputs(standin)
    backend = TrtBackend(standin.module, caps, cuda)
    first = backend.load(plan_file(tmp_path), {"streams": 2})
    second = backend.load(plan_file(tmp_path), {"streams": 4})  # lanes are fixed by the first
    io = backend.io(first)
    assert [s["name"] for s in io["inputs"]] == ["x", "y"]
    assert io["outputs"] == [{"name": "out", "datatype": "FP32", "shape": [-1, 3, 16, 16]}]
    assert backend.info(first)["lanes"] == 2
    outputs = backend.infer(first, feeds())
    backend.infer(second, feeds())
    assert set(outputs) == {"out"}
    rec = standin.recorder
    # one context per lane per engine, none with memory of its own; both engines share the arena
    if release in V1:
        assert len(rec.calls("ICudaEngine.create_execution_context_without_device_memory")) == 4
        assert rec.sets("IExecutionContext.device_memory")
        assert not rec.touched("ICudaEngine.device_memory_size_v2")
    else:
        assert len(rec.calls("ICudaEngine.create_execution_context")) == 4
        assert not rec.touched("ICudaEngine.create_execution_context_without_device_memory")
    assert rec.touched("IExecutionContext.set_device_memory") == (release not in (*V1, "10.0"))
    mallocs = [args[0] for name, args in cuda.calls if name == "malloc"]
    assert mallocs.count(64 << 20) == 2  # the arena: one region per lane, allocated once
    assert all(is_named_kind(kind) for kind in cuda.copy_kinds())
    backend.unload(first)
    backend.unload(second)
    assert not [e for e in rec.events if e.op == "missing"]


def test_refit_and_profile_through_the_backend(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda, release: str, tmp_path: Path
) -> None:
    engine_with_two_inputs(standin)
    standin.script("Refitter.get_missing_weights", [])
    standin.script("Refitter.refit_cuda_engine", True)
    standin.script("Refitter.get_all_weights", ["w", "b"])
    standin.script("Refitter.set_named_weights", True)
    standin.script("OnnxParserRefitter.refit_from_bytes", True)
    backend = TrtBackend(standin.module, caps, cuda)
    model = backend.load(plan_file(tmp_path), {})
    onnx = tmp_path / "new.onnx"
    onnx.write_bytes(conv_onnx(seed=1))
    assert backend.info(model)["refittable"] is True
    backend.refit(model, str(onnx))
    rec = standin.recorder
    assert rec.touched("OnnxParserRefitter") == (release not in V1)
    assert rec.touched("Refitter.set_named_weights") == (release in V1)
    layers = backend.profile(model, feeds(), runs=3, warmups=1)["layers"]
    assert [name for name, _ in layers] == ["/conv/Conv + /relu/Relu"] * 3
    backend.unload(model)


def test_build_from_plain_options_writes_the_plan_and_the_timing_cache(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda, release: str, tmp_path: Path
) -> None:
    network_with_two_dynamic_inputs(standin)
    source, target = tmp_path / "m.onnx", tmp_path / "m.plan"
    source.write_bytes(conv_onnx())
    timing = tmp_path / "timing.cache"
    lines: list[str] = []
    backend = TrtBackend(standin.module, caps, cuda)
    options = {"profiles": PROFILE, "refittable": True, "timing_cache_path": str(timing)}
    info = backend.build(str(source), str(target), options, lines.append)
    assert target.read_bytes()
    assert timing.is_file()
    assert info["path"] == str(target)
    assert lines[-1].endswith("plan serialized")
    rec = standin.recorder
    assert rec.calls("IBuilderConfig.set_flag")[0].args == (standin.module.BuilderFlag.REFIT,)
    assert rec.touched("NetworkDefinitionCreationFlag.EXPLICIT_BATCH") == release.startswith("8.")
    assert not [e for e in rec.events if e.op == "missing"]


def test_plain_options_refuse_unknown_keys_and_read_the_caches(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="unknown build options: precison"):
        build_options({"precison": "fp16"})
    cache = tmp_path / "calib.cache"
    cache.write_bytes(b"TRT-8502-EntropyCalibration2")
    options = build_options(
        {"precision": "int8", "profiles": PROFILE, "calibration_cache_path": str(cache)}
    )
    assert options.calibration_cache == b"TRT-8502-EntropyCalibration2"
    assert [r.input for r in options.profiles[0]] == ["x", "y"]
    assert options.timing_cache is None


def test_unloaded_model_answers_an_error(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda, tmp_path: Path
) -> None:
    engine_with_two_inputs(standin)
    backend = TrtBackend(standin.module, caps, cuda)
    model = backend.load(plan_file(tmp_path), {})
    backend.unload(model)
    with pytest.raises(RuntimeError, match="unloaded"):
        backend.infer(model, {"x": np.ones((1, 3, 16, 16), np.float32)})
