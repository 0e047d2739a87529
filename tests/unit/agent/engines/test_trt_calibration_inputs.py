"""An INT8 config without a calibration cache sends the version's
sample inputs to the TensorRT host, which calibrates on the device; a config with a cache, or not
INT8, or strongly typed, never does."""

from __future__ import annotations

from pathlib import Path

from agent.engines.build_protocol import BuildRequest
from agent.engines.trt_config import host_build_options, host_build_request
from shared.delegate import DelegateConfig


def test_row2_int8_without_a_cache_sends_the_sample_inputs(tmp_path: Path) -> None:
    request = BuildRequest(
        onnx_path=tmp_path / "m.onnx",
        output_path=tmp_path / "m.plan",
        config=DelegateConfig(precision="int8"),
        calibration_inputs_path=tmp_path / "reference.npz",
    )
    options = host_build_request(request)["options"]
    assert options["calibration_inputs_path"] == str(tmp_path / "reference.npz")
    assert "calibration_cache_path" not in options


def test_row2_the_sample_inputs_go_only_where_they_calibrate() -> None:
    cached = DelegateConfig(precision="int8", calibration_cache_sha256="c" * 64)
    options = host_build_options(cached, None, None, "calib.cache", "reference.npz")
    assert options["calibration_cache_path"] == "calib.cache"
    assert "calibration_inputs_path" not in options
    for config in (
        DelegateConfig(precision="fp16"),
        DelegateConfig(precision="int8", strongly_typed=True),
    ):
        assert "calibration_inputs_path" not in host_build_options(
            config, None, None, None, "reference.npz"
        )
    best = host_build_options(DelegateConfig(precision="best"), None, None, None, "ref.npz")
    assert best["calibration_inputs_path"] == "ref.npz"
