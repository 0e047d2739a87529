"""The pure TensorRT parts, tested everywhere: config → builder plan, plan header parsing."""

from __future__ import annotations

import struct

import pytest

from agent.engines.plan_header import PlanMismatch, check_plan, plan_trt_version
from agent.engines.trt_config import MIB, TrtConfigError, build_plan
from shared.delegate import DelegateConfig, ShapeProfile


def plan_bytes(version: tuple[int, int, int, int], tag: int = 0x74727466, ser: int = 0) -> bytes:
    return struct.pack("<II", tag, ser) + bytes(16) + bytes(version) + b"\x00" * 64


def test_plan_header_gives_the_tensorrt_version() -> None:
    assert plan_trt_version(plan_bytes((10, 3, 0, 30))) == (10, 3, 0, 30)
    assert plan_trt_version(b"\x08\x01onnx protobuf bytes, not a plan at all......") is None
    assert plan_trt_version(plan_bytes((10, 3, 0, 30), ser=1)) is None
    assert plan_trt_version(b"ftrt") is None


def test_plan_check_refuses_another_tensorrt_and_says_rebuild() -> None:
    assert check_plan(plan_bytes((10, 3, 0, 30)), "10.3.0.30") == (10, 3, 0, 30)
    assert check_plan(plan_bytes((10, 3, 0, 30)), "10.3.0") == (10, 3, 0, 30)
    with pytest.raises(PlanMismatch, match=r"TensorRT 10\.3\.0\.30, this device runs .* rebuild"):
        check_plan(plan_bytes((10, 3, 0, 30)), "10.7.0.23")
    with pytest.raises(PlanMismatch, match="not a TensorRT plan"):
        check_plan(b"garbage" * 10, "10.3.0.30")


def test_default_config_is_plain_fp32_on_the_gpu() -> None:
    plan = build_plan(DelegateConfig(), platform_has_fast_fp16=True, dla_cores=0)
    assert plan.network_flags == ()
    assert plan.builder_flags == ()
    assert plan.memory_pools == {}
    assert (plan.default_device_type, plan.dla_core) == ("GPU", None)
    assert plan.builder_optimization_level == 3
    assert plan.use_timing_cache


@pytest.mark.parametrize(
    ("precision", "fast_fp16", "flags"),
    [
        ("fp16", True, ("FP16",)),
        ("fp16", False, ()),
        ("int8", True, ("INT8",)),
        ("best", True, ("FP16", "INT8")),
    ],
)
def test_precision_maps_to_builder_flags(
    precision: str, fast_fp16: bool, flags: tuple[str, ...]
) -> None:
    config = DelegateConfig(precision=precision)  # type: ignore[arg-type]
    assert build_plan(config, fast_fp16, dla_cores=None).builder_flags == flags


def test_strongly_typed_sets_the_network_flag_and_no_precision_flags() -> None:
    plan = build_plan(DelegateConfig(strongly_typed=True, precision="fp16"), True, None)
    assert plan.network_flags == ("STRONGLY_TYPED",)
    assert plan.builder_flags == ()
    assert "types from the ONNX" in plan.notes[0]


def test_dla_follows_trtexec_use_dla_core() -> None:
    plan = build_plan(DelegateConfig(dla_core=1, precision="fp16"), True, dla_cores=2)
    assert (plan.default_device_type, plan.dla_core) == ("DLA", 1)
    assert plan.builder_flags == ("FP16", "PREFER_PRECISION_CONSTRAINTS", "GPU_FALLBACK")
    strict = build_plan(
        DelegateConfig(dla_core=0, precision="int8", gpu_fallback=False), True, dla_cores=2
    )
    assert strict.builder_flags == ("INT8", "PREFER_PRECISION_CONSTRAINTS", "DIRECT_IO")
    with pytest.raises(TrtConfigError, match="this device has no DLA"):
        build_plan(DelegateConfig(dla_core=0, precision="fp16"), True, dla_cores=0)


def test_pools_profiles_streams_and_calibration() -> None:
    profile = ShapeProfile(
        input="image", min=(1, 3, 224, 224), opt=(4, 3, 224, 224), max=(8, 3, 224, 224)
    )
    config = DelegateConfig(
        workspace_mib=512,
        shapes=(profile,),
        max_aux_streams=0,
        builder_optimization_level=0,
        precision="int8",
        calibration_cache_sha256="c" * 64,
    )
    plan = build_plan(config, True, None)
    assert plan.memory_pools == {"WORKSPACE": 512 * MIB}
    assert plan.profiles == (profile,)
    assert plan.max_aux_streams == 0
    assert plan.builder_optimization_level == 0
    assert not plan.use_timing_cache
    assert plan.use_calibration_cache
