"""Capabilities per release, checked against the API table itself: every capability that names a
TensorRT member agrees with that member's presence at the release (no hand-kept truth)."""

from __future__ import annotations

import numpy as np
import pytest

from agent.trt_host import plan_header
from agent.trt_host.dtypes import UnsupportedDType, to_numpy
from agent.trt_host.onnx_weights import initializers
from agent.trt_host.versions import MEMORY_V2, Capabilities, UnsupportedTensorRT, parse_version
from tests.tensorrt_api.scenes import conv_onnx
from tests.tensorrt_api.standin import StandIn

pytestmark = pytest.mark.tensorrt_api


def test_capabilities_agree_with_the_api_table(standin: StandIn, caps: Capabilities) -> None:
    has = standin.present
    assert caps.explicit_batch_flag == (
        has("NetworkDefinitionCreationFlag", "EXPLICIT_BATCH") and caps.version < (10, 0, 0)
    )
    assert caps.progress_monitor == has("-", "IProgressMonitor")
    assert caps.optimization_level == has("IBuilderConfig", "builder_optimization_level")
    assert caps.aux_streams == has("IBuilderConfig", "max_aux_streams")
    assert caps.int8_calibrator == has("IBuilderConfig", "int8_calibrator")
    assert caps.weak_typing_flags == has("BuilderFlag", "FP16")
    assert caps.platform_speed_queries == has("Builder", "platform_has_fast_fp16")
    assert (caps.memory_mode == MEMORY_V2) == has("IExecutionContext", "set_device_memory")
    assert (caps.refit_route == "onnx_refitter") == has("-", "OnnxParserRefitter")
    assert caps.dtypes == {m for m in standin.by_owner["DataType"] if has("DataType", m)} - {
        "itemsize"
    }
    assert set(caps.tactic_sources) == {
        m for m in standin.by_owner["TacticSource"] if has("TacticSource", m)
    }


@pytest.mark.parametrize("text", ["8.4.3.1", "7.1.3", "11.2.0", "12.0", "garbage"])
def test_releases_outside_the_supported_range_are_a_clear_error(text: str) -> None:
    with pytest.raises(UnsupportedTensorRT, match="TensorRT"):
        Capabilities.for_version(text)


def test_versions_parse_from_trt_version_strings() -> None:
    assert parse_version("8.5.2.2") == (8, 5, 2)
    assert Capabilities.for_version("8.6.2.3").memory_mode == "v1_property"
    assert Capabilities.for_version("10.0.1").memory_mode == "strategy_property"
    assert Capabilities.for_version("10.3.0.30").memory_mode == "v2"


def test_bf16_is_refused_by_name_not_by_a_bare_typeerror() -> None:
    trt = StandIn("10.3.0").module
    with pytest.raises(UnsupportedDType, match="BF16 of tensor 'logits'"):
        to_numpy(trt.DataType.BF16, "logits")
    assert to_numpy(trt.DataType.HALF) == np.float16


def test_onnx_initializers_are_read_without_the_onnx_package() -> None:
    from onnx import load_from_string, numpy_helper

    data = conv_onnx(seed=3)
    want = {t.name: numpy_helper.to_array(t) for t in load_from_string(data).graph.initializer}
    got = initializers(data)
    assert set(got) == set(want)
    for name, array in want.items():
        np.testing.assert_array_equal(got[name], array)


def test_plan_header_is_read_where_documented_and_unknown_otherwise() -> None:
    header = b"ftrt\x00\x00\x00\x00" + bytes(16)
    assert plan_header.describe(header + bytes((8, 6, 1, 6)) + bytes(8)) == "8.6.1.6"
    assert plan_header.describe(header + bytes((8, 5, 2, 2)) + bytes(8)) == "unknown"
    assert plan_header.describe(b"not a plan") == "unknown"
    with pytest.raises(plan_header.PlanMismatch, match="rebuild"):
        plan_header.check(header + bytes((10, 3, 0, 26)) + bytes(8), (8, 6, 1))
