"""Each defect under "Why" in issue 15, shown on today's in-process TensorRT code and fixed in
agent/trt_host, under the same generated stand-in at 8.5.2 and 8.6.1 (JetPack 5.1 and 6.0).

Every test runs twice: ``trt_host`` must pass; ``in_process`` (agent/engines/builder_trt.py,
agent/runtimes/trt.py, written for TensorRT >= 10.1) is ``xfail(strict=True)``: it must FAIL,
so the test proves the defect. When the agent is wired to the host (issue 15 part 4) and the
in-process modules go, the ``in_process`` parameter goes with them. The old runtime's arena is
replaced by :class:`_Arena` (it would need CUDA Python, which is the defect of one test here).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.trt_host.build import BuildOptions, build
from agent.trt_host.engine import load
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
ON_8X = pytest.mark.parametrize("release", ["8.5.2", "8.6.1"])
IMPLS = [
    "trt_host",
    pytest.param("in_process", marks=pytest.mark.xfail(strict=True, reason="issue 15 defect")),
]


def build_with(
    impl: str, s: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **opts: Any
) -> None:
    network_with_two_dynamic_inputs(s)
    if impl == "trt_host":
        caps = Capabilities.for_version(VERSIONS[s.release])
        build(
            s.module,
            caps,
            conv_onnx(),
            BuildOptions(profiles=TWO_INPUTS, **opts),
            lambda p, m: None,
        )
        return
    from agent.engines.build_protocol import BuildRequest
    from agent.engines.builder_trt import build as old_build
    from shared.delegate import DelegateConfig

    monkeypatch.setitem(sys.modules, "tensorrt", s.module)
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(conv_onnx())
    shapes = [r.__dict__ for r in TWO_INPUTS[0]]
    config = DelegateConfig.model_validate({"runtime": "tensorrt", "shapes": shapes})
    request = BuildRequest(onnx_path=onnx, output_path=tmp_path / "plan", config=config)
    old_build(request, lambda p, m: None)


class _Arena:
    lanes = 1

    def reserve(self, needed: int) -> bool:
        return False

    @contextmanager
    def lane(self) -> Iterator[Any]:
        class Lane:
            index, generation, ptr, size, stream, stream_handle = 0, 1, 0x1000, 1 << 20, 7, 7

        yield Lane()

    def synchronize(self) -> None:
        return None


class _CudaPython:
    """cuda-python 12.6.0's cudaMemcpyAsync: the copy kind must be a cudaMemcpyKind member."""

    class cudaError_t:
        cudaSuccess = 0

    def __init__(self) -> None:
        self.kinds: list[Any] = []
        self._next = 0x2000

    def cudaMalloc(self, n: int) -> tuple[int, int]:
        self._next += 0x1000
        return 0, self._next

    def cudaMemcpyAsync(self, dst: int, src: int, n: int, kind: Any, stream: Any) -> tuple[int]:
        self.kinds.append(kind)
        kind.value  # noqa: B018 - cuda-python reads the enum's value: AttributeError for an int
        return (0,)

    def cudaStreamSynchronize(self, stream: Any) -> tuple[int]:
        return (0,)


def infer_with(impl: str, s: StandIn, monkeypatch: pytest.MonkeyPatch) -> Any:
    if impl == "trt_host":
        cuda = RecordingCuda()
        engine = load(s.module, Capabilities.for_version(VERSIONS[s.release]), cuda, b"plan")
        engine.context().infer(feeds())
        return cuda.copy_kinds()
    from agent.runtimes import cuda_arena
    from agent.runtimes import trt as old_trt

    fake = _CudaPython()
    monkeypatch.setattr(cuda_arena, "_runtime", fake)
    engine = s.module.Runtime(s.module.Logger()).deserialize_cuda_engine(b"plan")
    model = old_trt.TrtModel(s.module, engine, _Logger(), _Arena())  # type: ignore[arg-type]
    model.infer(feeds())
    return fake.kinds


class _Logger:
    errors: list[str] = []


@ON_8X
@pytest.mark.parametrize("impl", IMPLS)
def test_network_is_created_with_explicit_batch_on_8x(
    impl: str, release: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = StandIn(release)
    try:
        build_with(impl, s, tmp_path, monkeypatch)
    finally:
        flags = s.recorder.calls("Builder.create_network")
    assert flags
    assert s.recorder.touched("NetworkDefinitionCreationFlag.EXPLICIT_BATCH")


@ON_8X
@pytest.mark.parametrize("impl", IMPLS)
def test_build_reports_progress_on_8x_without_iprogressmonitor(
    impl: str, release: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = StandIn(release)
    build_with(impl, s, tmp_path, monkeypatch)
    assert s.recorder.touched("Builder.build_serialized_network")
    assert not s.recorder.touched("IProgressMonitor")


@ON_8X
@pytest.mark.parametrize("impl", IMPLS)
def test_two_dynamic_inputs_share_one_checked_profile(
    impl: str, release: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = StandIn(release)
    with contextlib.suppress(AttributeError):  # the old path stops earlier on 8.x
        build_with(impl, s, tmp_path, monkeypatch)
    assert len(s.recorder.calls("Builder.create_optimization_profile")) == 1
    assert len(s.recorder.calls("IOptimizationProfile.set_shape")) == 2


@ON_8X
@pytest.mark.parametrize("impl", IMPLS)
def test_refittable_engines_are_built_with_builder_flag_refit(
    impl: str, release: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = StandIn(release)
    build_with(
        impl, s, tmp_path, monkeypatch, **({"refittable": True} if impl == "trt_host" else {})
    )
    flags = [c.args[0] for c in s.recorder.calls("IBuilderConfig.set_flag")]
    assert s.module.BuilderFlag.REFIT in flags


@ON_8X
@pytest.mark.parametrize("impl", IMPLS)
def test_context_on_user_managed_memory_runs_on_8x(
    impl: str, release: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s)
    infer_with(impl, s, monkeypatch)
    assert s.recorder.touched("IExecutionContext.execute_async_v3")


@ON_8X
@pytest.mark.parametrize("impl", IMPLS)
def test_copy_direction_is_a_named_cudamemcpykind(
    impl: str, release: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s)
    if impl == "in_process":  # get past the 10.x-only memory calls to reach the copies
        s.script(
            "ICudaEngine.create_execution_context", lambda self, *a: s._new("IExecutionContext")
        )
    kinds = infer_with(impl, s, monkeypatch)
    assert kinds
    assert all(isinstance(k, ctypes.c_int) for k in kinds)


@ON_8X
@pytest.mark.parametrize("impl", IMPLS)
def test_a_refused_input_shape_is_an_error_with_tensorrts_words(
    impl: str, release: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s, set_shape_ok=False)
    s.script("IExecutionContext.set_input_shape", lambda self, name, shape: False)
    with pytest.raises(Exception, match="shape") as raised:
        infer_with(impl, s, monkeypatch)
    assert not isinstance(raised.value, AttributeError)
    assert not s.recorder.touched("IExecutionContext.execute_async_v3")


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("release", ["8.6.1"])
def test_fp8_output_is_refused_by_name(
    impl: str, release: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s, dtype="FP8")

    def nptype(trt_type: Any) -> Any:  # tensorrt/__init__.py's nptype: a dict lookup
        if trt_type == s.module.DataType.FP8:
            raise TypeError("Could not resolve TensorRT datatype to an equivalent numpy datatype.")
        return np.float32

    s.script("nptype", lambda this, t: nptype(t))
    with pytest.raises(TypeError, match="FP8 of tensor 'out'"):
        infer_with(impl, s, monkeypatch)
