"""Per TensorRT release, does the agent's TensorRT build take the model
(``tensorrt: builds``) or does the slot fall back to ONNX Runtime, in TensorRT's words.

Each refusal names the source it was checked against: onnx-tensorrt's importers at the release
tags (``git show release/X:builtin_op_importers.cpp`` / ``onnxOpImporters.cpp``) and NVIDIA
TensorRT's headers (``git show release/X:include/NvInferRuntime.h``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from controller.analysis.report import analyze
from controller.cli.analyze import analyze as analyze_command
from tests.analysis_models import fp32, ints, make_model, weights

VERSIONS = ("8.5", "8.6", "10.1")
DYNAMIC_AXES = "This version of TensorRT does not support dynamic axes."
ACTIVATION_TYPES = "DequantizeLinear: only activation types allowed as input to this layer"


def slice_with_computed_axes() -> bytes:
    """Opset 15: Slice of ``x`` [1, n] whose axes come from Shape → Gather → Cast (what the
    voice activity detector exported at opset 15 does): not an initializer, not a Constant."""
    return make_model(
        [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "zero"], ["first"], axis=0),
            helper.make_node("Cast", ["first"], ["axes"], to=TensorProto.INT64),
            helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"]),
        ],
        [fp32("x", [1, "n"])],
        [fp32("y", None)],
        [ints("zero", [0]), ints("starts", [0]), ints("ends", [1])],
        opset=15,
    )


def test_slice_with_axes_computed_through_shape_gather_cast_falls_back() -> None:
    """onnx-tensorrt ``DEFINE_BUILTIN_OP_IMPORTER(Slice)`` in ``builtin_op_importers.cpp`` at
    release/8.5-GA and release/8.6-GA, and in ``onnxOpImporters.cpp`` at release/10.1-GA:
    ``axes = ShapeTensor(ctx, inputs.at(3))`` then ``ASSERT(axes.allValuesKnown() && "This
    version of TensorRT does not support dynamic axes.")``; a ShapeTensor made from a tensor
    (``ShapeTensor.cpp``, depth 0) never knows its values, so only weights pass."""
    for version in VERSIONS:
        report = analyze(slice_with_computed_axes(), version, use_tensorrt=False)
        assert report.prediction is not None
        assert report.prediction.tensorrt == "falls_back", version
        (reason,) = report.prediction.reasons
        assert reason.startswith("Slice_3: Slice: `axes` (axes) must be an initializer")
        assert reason.endswith(f'"{DYNAMIC_AXES}"')
        assert report.verdict.kind in {"partial", "not_worth"}


def dequantized_bias(*, constant: bool, dtype: int = TensorProto.INT32) -> bytes:
    """Conv whose bias is DequantizeLinear(int32 bias, scale, zero point), as ONNX Runtime's
    ``quantize_static`` writes in QDQ format; ``constant``: the int32 bias is an initializer,
    else a graph input."""
    scale = numpy_helper.from_array(np.array(0.01, np.float32), "b_scale")
    zero = numpy_helper.from_array(np.array(0, np.int32), "b_zero")
    bias = numpy_helper.from_array(np.arange(4, dtype=np.int32), "b_q")
    inputs = [fp32("x", [1, 3, 8, 8])]
    initializers = [weights("w", [4, 3, 3, 3]), scale, zero]
    if constant:
        initializers.append(bias)
    else:
        inputs.append(helper.make_tensor_value_info("b_q", dtype, [4]))
    return make_model(
        [
            helper.make_node("DequantizeLinear", ["b_q", "b_scale", "b_zero"], ["b"]),
            helper.make_node("Conv", ["x", "w", "b"], ["y"]),
        ],
        inputs,
        [fp32("y", [1, 4, 6, 6])],
        initializers,
        opset=13,
    )


def test_a_constant_int32_dequantize_linear_builds_with_a_folded_note() -> None:
    """onnx-tensorrt ``QuantDequantLinearHelper`` in ``builtin_op_importers.cpp`` at release/8.5-GA
    and release/8.6-GA, ``onnxOpImporters.cpp`` at release/10.1-GA: ``addDequantize(dataInput,
    ...)`` with ``dataInput = convertToTensor(inputs.at(0))``, an INT32 tensor for an int32
    initializer; TensorRT's IDequantizeLayer refuses it ("DequantizeLinear: only activation types
    allowed as input to this layer", measured on TensorRT 8.6.0 with ONNX Runtime's quantizer).
    The agent folds a DequantizeLinear whose inputs are all initializers into an FP32
    initializer before building, so it refuses nothing."""
    for version in VERSIONS:
        report = analyze(dequantized_bias(constant=True), version, use_tensorrt=False)
        assert report.prediction is not None
        assert report.prediction.tensorrt == "builds", (version, report.prediction.reasons)
        note = report.nodes[0].note or ""
        assert "folded into an FP32 initializer by the agent" in note
        assert ACTIVATION_TYPES in note
        assert any("folded" in n for n in report.prediction.notes)


def test_a_computed_int32_dequantize_linear_falls_back_in_tensorrt_words() -> None:
    for version in VERSIONS:
        report = analyze(dequantized_bias(constant=False), version, use_tensorrt=False)
        assert report.prediction is not None
        assert report.prediction.tensorrt == "falls_back", version
        (reason,) = report.prediction.reasons
        assert reason.startswith(
            f'DequantizeLinear_0: "{ACTIVATION_TYPES}": input x (b_q) is INT32'
        )


def test_a_uint8_dequantize_linear_is_refused_by_the_importer() -> None:
    """Same helper, same tags: ``notInvalidType(inputs.at(0), {"UINT8"})`` → "Found invalid input
    type of UINT8"."""
    model = dequantized_bias(constant=False, dtype=TensorProto.UINT8)
    for version in VERSIONS:
        report = analyze(model, version, use_tensorrt=False)
        assert 'Found invalid input type of UINT8"' in (report.nodes[0].reason or ""), version


def nonzero() -> bytes:
    return make_model(
        [
            helper.make_node("Greater", ["x", "zero"], ["positive"]),
            helper.make_node("NonZero", ["positive"], ["where"]),
        ],
        [fp32("x", [2, 4])],
        [helper.make_tensor_value_info("where", TensorProto.INT64, [2, None])],
        [numpy_helper.from_array(np.array(0, np.float32), "zero")],
    )


def test_nonzero_builds_from_8_5_with_an_output_allocator_note() -> None:
    """NVIDIA TensorRT ``include/NvInferRuntime.h``: ``class IOutputAllocator`` is there at
    release/8.5 and release/8.6 (absent at release/8.4), so data-dependent shapes run (the agent
    gives the engine one). onnx-tensorrt ``DEFINE_BUILTIN_OP_IMPORTER(NonZero)`` at release/8.5-GA
    and release/8.6-GA takes FLOAT, HALF, INT32, INT8 or BOOL; at release/10.1-GA
    (``onnxOpImporters.cpp``) FLOAT, HALF, BF16, INT32, INT64, INT8 or BOOL, more than the
    release's ``docs/operators.md`` (FP32, FP16) lists."""
    for version in VERSIONS:
        report = analyze(nonzero(), version, use_tensorrt=False)
        assert report.prediction is not None
        assert report.prediction.tensorrt == "builds", (version, report.prediction.reasons)
        assert "IOutputAllocator" in (report.nodes[1].note or "")
        assert any("IOutputAllocator" in n for n in report.prediction.notes)


def test_dims_named_alike_are_a_note_the_agent_renames_them() -> None:
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [fp32("x", ["?", 3, "?", "?"])],
        [fp32("y", ["?", 3, "?", "?"])],
    )
    report = analyze(model, "8.6", use_tensorrt=False)
    assert report.prediction is not None
    assert report.prediction.tensorrt == "builds"
    (note,) = report.prediction.notes
    assert note.startswith("input dims share a name: '?' (3 dims)")
    assert "the agent renames them" in note


def test_the_cli_prints_the_prediction_per_requested_release(tmp_path: Path) -> None:
    path = tmp_path / "slice.onnx"
    path.write_bytes(slice_with_computed_axes())
    runner = CliRunner()

    human = runner.invoke(analyze_command, [str(path), "--trt", "8.6"])
    assert human.exit_code == 0, human.output
    lines = human.output.splitlines()
    assert lines[1].startswith("not worth delegating: ")  # the verdict, then its reasons
    at = lines.index("tensorrt: falls back to ONNX Runtime")
    assert lines[at + 1].startswith("  - Slice_3: Slice: `axes` (axes)")
    assert DYNAMIC_AXES in lines[at + 1]
    assert lines[at + 2].startswith("support: ")

    both = runner.invoke(analyze_command, [str(path), "--trt", "8.6", "--trt", "10.1", "--json"])
    assert both.exit_code == 0, both.output
    reports = json.loads(both.output)
    assert sorted(reports) == ["10.1", "8.6"]
    for version, report in reports.items():
        assert report["trt_version"] == version
        assert report["prediction"]["tensorrt"] == "falls_back"
        assert report["prediction"]["line"] == "tensorrt: falls back to ONNX Runtime"
        assert report["report_version"] == 2

    one = json.loads(runner.invoke(analyze_command, [str(path), "--trt", "8.5", "--json"]).output)
    assert one["trt_version"] == "8.5"  # one release: the report itself, as before


def test_quantization_with_zero_points_falls_back_and_symmetric_builds() -> None:
    """``shiftIsAllZeros(zeroPoint)`` in the Q/DQ importer (builtin_op_importers.cpp at
    release/8.5-GA and 8.6-GA, onnxOpImporters.cpp at 10.1-GA); real 8.5.2 refused ONNX Runtime's
    default (asymmetric) QDQ so: "TRT only supports symmetric quantization"."""
    from tests.model_families_qdq import qdq_int8_per_channel, qdq_int8_symmetric

    for version in ("8.5", "8.6", "10.1"):
        default = analyze(qdq_int8_per_channel().data, version, use_tensorrt=False).prediction
        assert default is not None
        assert default.tensorrt == "falls_back"
        assert "TensorRT only supports symmetric quantization" in default.reasons[0]
        symmetric = analyze(qdq_int8_symmetric().data, version, use_tensorrt=False).prediction
        assert symmetric is not None
        assert symmetric.tensorrt == "builds"
        assert any("folded" in note for note in symmetric.notes)


def test_a_model_input_read_as_a_shape_falls_back() -> None:
    """A shape input's profile needs values (``set_shape_input``), which delegate configs do not
    hold: real 8.5.2 and 8.6.0 refused it, "optimization profile is missing values for shape
    input". A shape computed inside the model (Shape → Reshape) is no model input: it builds."""
    from tests.model_families import classic_cnn, shape_tensor_input

    for version in ("8.5", "8.6", "10.1"):
        shaped = analyze(shape_tensor_input().data, version, use_tensorrt=False).prediction
        assert shaped is not None
        assert shaped.tensorrt == "falls_back"
        assert "missing values for shape input" in shaped.reasons[0]
        plain = analyze(classic_cnn().data, version, use_tensorrt=False).prediction
        assert plain is not None
        assert plain.tensorrt == "builds"
