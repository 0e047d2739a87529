"""``jetfleet devices ls`` and ``show`` say when a slot serves on ONNX Runtime because TensorRT
could not, with TensorRT's words; a slot TensorRT serves reads as before."""

from __future__ import annotations

from typing import Any

from controller.cli.devices import SLOT_HEADERS, _slot_summary, slot_rows

REASON = "TensorRT build refused: IIfConditionalOutputLayer inputs must have the same shape"


def device(**slot: Any) -> dict[str, Any]:
    reported = {"name": "vad", "active_version": "3", "phase": "serving", **slot}
    return {"reported": [reported], "desired": [{"name": "vad", "version": "3"}]}


def test_a_fallback_is_shown_with_tensorrts_words() -> None:
    fell_back = device(runtime="onnxruntime", fallback_reason=REASON)
    assert _slot_summary(fell_back) == "vad:3(serving, onnxruntime fallback)"
    [row] = slot_rows(fell_back)
    runtime = row[SLOT_HEADERS.index("runtime")]
    assert runtime == f"onnxruntime (fallback: {REASON[:80]})"


def test_a_slot_tensorrt_serves_reads_as_before() -> None:
    served = device(runtime="tensorrt")
    assert _slot_summary(served) == "vad:3(serving)"
    assert slot_rows(served)[0][SLOT_HEADERS.index("runtime")] == "tensorrt"
