"""``analyze()``: the whole report, as the controller will store it."""

from __future__ import annotations

import pytest
from onnx import helper

from controller.analysis import AnalysisReport, analyze, resolve_trt_version
from controller.errors import InvalidModel
from tests.analysis_models import fp32, make_model, mobilenet_v2_like, weights


def hardmax_head() -> bytes:
    """Conv → Flatten → Hardmax: the head op arrived in the 10.1 parser."""
    return make_model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"]),
            helper.make_node("Flatten", ["c"], ["f"]),
            helper.make_node("Hardmax", ["f"], ["y"]),
        ],
        [fp32("x", [1, 3, 4, 4])],
        [fp32("y", [1, 16])],
        [weights("w", [1, 3, 1, 1])],
    )


def test_an_op_new_in_10_1_fully_delegates_there_and_splits_on_8_5() -> None:
    new, old = analyze(hardmax_head(), "10.1"), analyze(hardmax_head(), "8.5")
    assert new.verdict.kind == "full"
    assert old.verdict.kind == "partial"
    assert old.verdict.crossings == 1
    assert old.verdict.crossing_bytes == 16 * 4
    assert [u.op_type for u in old.top_unsupported] == ["Hardmax"]
    assert "TensorRT 10.1" in old.top_unsupported[0].advice
    assert [n.placement for n in old.nodes] == ["GPU#1", "GPU#1", "CPU"]


def test_the_report_survives_a_json_round_trip() -> None:
    report = analyze(mobilenet_v2_like(size=64, custom_after_block=2), "8.6")
    again = AnalysisReport.model_validate_json(report.model_dump_json())
    assert again == report
    assert report.verdict.kind == "partial"
    assert report.verdict.partitions == 2
    assert report.rates.flop_share == 1.0
    assert report.tensorrt.checked is False
    assert report.histogram[0].op_type in {"Conv", "BatchNormalization"}


def test_bytes_that_are_not_onnx_are_refused_with_what_to_do() -> None:
    with pytest.raises(InvalidModel, match="ONNX"):
        analyze(b"definitely not a model", "10.1")


def test_an_unknown_trt_version_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match=r"8\.5, 8\.6, 10\.1"):
        analyze(hardmax_head(), "9.9")


def test_auto_means_10_1_when_tensorrt_is_absent() -> None:
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        assert resolve_trt_version("auto") == "10.1"
    else:
        assert resolve_trt_version("auto") in {"8.5", "8.6", "10.1"}
    assert resolve_trt_version("8.5") == "8.5"
