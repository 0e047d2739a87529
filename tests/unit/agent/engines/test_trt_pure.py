"""The pure TensorRT part of the agent, tested everywhere: delegate config → the host's build
request (plain JSON data; the host turns it into TensorRT flags per release)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.engines.build_protocol import BuildRequest
from agent.engines.trt_config import MIB, TrtConfigError, host_build_options, host_build_request
from shared.delegate import DelegateConfig, ShapeProfile


def test_default_config_is_plain_fp32_on_the_gpu() -> None:
    options = host_build_options(DelegateConfig(), dla_cores=0, timing_cache_path="t.cache")
    assert options["precision"] == "fp32"
    assert options["dla_core"] is None
    assert "workspace_bytes" not in options
    assert options["optimization_level"] == 3
    assert options["use_timing_cache"]
    assert options["timing_cache_path"] == "t.cache"
    assert options["profiles"] == []
    assert (options["tf32"], options["refittable"], options["disabled_tactic_sources"]) == (
        False,
        False,
        [],
    )


def test_tf32_refit_and_tactic_sources_reach_the_host() -> None:
    config = DelegateConfig(tf32=True, refittable=True, disabled_tactic_sources=("CUBLAS", "CUDNN"))
    options = host_build_options(config, None)
    assert (options["tf32"], options["refittable"]) == (True, True)
    assert options["disabled_tactic_sources"] == ["CUBLAS", "CUDNN"]


def test_strongly_typed_networks_take_their_types_from_the_onnx() -> None:
    options = host_build_options(DelegateConfig(strongly_typed=True, precision="fp16"), None)
    assert (options["precision"], options["strongly_typed"]) == ("fp32", True)


def test_a_dla_core_this_device_lacks_is_refused_before_any_build() -> None:
    options = host_build_options(DelegateConfig(dla_core=1, precision="fp16"), dla_cores=2)
    assert (options["dla_core"], options["gpu_fallback"]) == (1, True)
    with pytest.raises(TrtConfigError, match="this device has no DLA"):
        host_build_options(DelegateConfig(dla_core=0, precision="fp16"), dla_cores=0)


def test_every_shape_goes_into_one_profile_so_two_dynamic_inputs_can_build() -> None:
    """One profile per dynamic input could never build a two-input model."""
    shapes = tuple(
        ShapeProfile(input=n, min=(1, 3, 8, 8), opt=(2, 3, 8, 8), max=(4, 3, 8, 8)) for n in "xy"
    )
    options = host_build_options(DelegateConfig(shapes=shapes), None)
    assert [[r["input"] for r in p] for p in options["profiles"]] == [["x", "y"]]


def test_pools_streams_caches_and_the_request(tmp_path: Path) -> None:
    config = DelegateConfig(
        workspace_mib=512,
        max_aux_streams=0,
        builder_optimization_level=0,
        precision="int8",
        calibration_cache_sha256="c" * 64,
    )
    request = BuildRequest(
        onnx_path=tmp_path / "m.onnx",
        output_path=tmp_path / "m.plan",
        config=config,
        timing_cache_path=tmp_path / "t.cache",
        calibration_cache_path=tmp_path / "calib.cache",
    )
    plain = host_build_request(request)
    assert (plain["source"], plain["target"]) == (
        str(tmp_path / "m.onnx"),
        str(tmp_path / "m.plan"),
    )
    options = plain["options"]
    assert options["workspace_bytes"] == 512 * MIB
    assert options["max_aux_streams"] == 0
    assert not options["use_timing_cache"]  # level 0 does not time tactics
    assert options["calibration_cache_path"] == str(tmp_path / "calib.cache")
