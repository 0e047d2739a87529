"""Each defect found in the former in-process TensorRT code, fixed in agent/trt_host, under the
same generated stand-in at 8.5.2 and 8.6.1 (JetPack 5.1 and 6.0).

Until commit 3424ecc every test here also ran against the old in-process code
(agent/engines/builder_trt.py, agent/runtimes/trt.py, written for TensorRT >= 10.1) as
``xfail(strict=True)`` and failed there, which proved each defect; those modules were then
replaced by the host (agent/trt_host/backend_trt.py, build_child.py), and the old variant went
with them.
"""

from __future__ import annotations

import ctypes
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


def build_with(s: StandIn, **opts: Any) -> None:
    network_with_two_dynamic_inputs(s)
    caps = Capabilities.for_version(VERSIONS[s.release])
    build(s.module, caps, conv_onnx(), BuildOptions(profiles=TWO_INPUTS, **opts), lambda p, m: None)


def infer_with(s: StandIn) -> Any:
    cuda = RecordingCuda()
    engine = load(s.module, Capabilities.for_version(VERSIONS[s.release]), cuda, b"plan")
    engine.context().infer(feeds())
    return cuda.copy_kinds()


@ON_8X
def test_network_is_created_with_explicit_batch_on_8x(release: str) -> None:
    s = StandIn(release)
    try:
        build_with(s)
    finally:
        flags = s.recorder.calls("Builder.create_network")
    assert flags
    assert s.recorder.touched("NetworkDefinitionCreationFlag.EXPLICIT_BATCH")


@ON_8X
def test_build_reports_progress_on_8x_without_iprogressmonitor(release: str) -> None:
    s = StandIn(release)
    build_with(s)
    assert s.recorder.touched("Builder.build_serialized_network")
    assert not s.recorder.touched("IProgressMonitor")


@ON_8X
def test_two_dynamic_inputs_share_one_checked_profile(release: str) -> None:
    s = StandIn(release)
    build_with(s)
    assert len(s.recorder.calls("Builder.create_optimization_profile")) == 1
    assert len(s.recorder.calls("IOptimizationProfile.set_shape")) == 2


@ON_8X
def test_refittable_engines_are_built_with_builder_flag_refit(release: str) -> None:
    s = StandIn(release)
    build_with(s, refittable=True)
    flags = [c.args[0] for c in s.recorder.calls("IBuilderConfig.set_flag")]
    assert s.module.BuilderFlag.REFIT in flags


@ON_8X
def test_context_on_user_managed_memory_runs_on_8x(release: str) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s)
    infer_with(s)
    assert s.recorder.touched("IExecutionContext.execute_async_v3")


@ON_8X
def test_copy_direction_is_a_named_cudamemcpykind(release: str) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s)
    kinds = infer_with(s)
    assert kinds
    assert all(isinstance(k, ctypes.c_int) for k in kinds)


@ON_8X
def test_a_refused_input_shape_is_an_error_with_tensorrts_words(release: str) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s, set_shape_ok=False)
    s.script("IExecutionContext.set_input_shape", lambda self, name, shape: False)
    with pytest.raises(Exception, match="shape") as raised:
        infer_with(s)
    assert not isinstance(raised.value, AttributeError)
    assert not s.recorder.touched("IExecutionContext.execute_async_v3")


@pytest.mark.parametrize("release", ["8.6.1"])
def test_fp8_output_is_refused_by_name(release: str) -> None:
    s = StandIn(release)
    engine_with_two_inputs(s, dtype="FP8")

    def nptype(trt_type: Any) -> Any:  # tensorrt/__init__.py's nptype: a dict lookup
        if trt_type == s.module.DataType.FP8:
            raise TypeError("Could not resolve TensorRT datatype to an equivalent numpy datatype.")
        return np.float32

    s.script("nptype", lambda this, t: nptype(t))
    with pytest.raises(TypeError, match="FP8 of tensor 'out'"):
        infer_with(s)
