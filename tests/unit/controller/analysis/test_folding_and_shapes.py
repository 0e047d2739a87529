"""Constants TensorRT folds, restrictions as the parser of each release has them, and
FLOPs of models with dynamic dims counted at a named shape.

Restriction tests name the onnx-tensorrt importer source and release tag they were checked
against (``git show release/X:builtin_op_importers.cpp`` / ``onnxOpImporters.cpp``).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from controller.analysis.graph import load_graph
from controller.analysis.ops_table import load_ops_table
from controller.analysis.report import analyze
from controller.analysis.support import NodeSupport, node_support
from tests.analysis_models import (
    dynamic_dims_cnn,
    fp32,
    ints,
    ir3_cnn_with_constant_of_shape_weights,
    make_model,
    weights,
)

VERSIONS = ("8.5", "8.6", "10.1")


def support_of(model: bytes, version: str) -> list[NodeSupport]:
    return node_support(load_graph(model), load_ops_table(), version)


def flops_at(height: int, width: int) -> int:
    return 2 * (8 * height * width) * 27 + 2 * (16 * height * width) * 72


# --- folding --------------------------------------------------------------------------------


def test_an_ir3_cnn_with_constant_of_shape_weights_is_fully_delegated() -> None:
    model = ir3_cnn_with_constant_of_shape_weights()
    for version in VERSIONS:
        report = analyze(model, version, use_tensorrt=False)
        assert report.verdict.kind == "full", (version, report.verdict.line)
        assert len(report.partitions) == 1
        assert report.crossings == []
        folded = [n for n in report.nodes if n.placement == "folded"]
        assert {n.op_type for n in folded} == {"ConstantOfShape"}
        assert report.rates.flop_share == 1.0
        assert report.rates.flops_total > 0
        assert report.rates.flops_at is None  # every input dim is fixed: nothing assumed


def test_shape_arithmetic_on_static_dims_folds_away() -> None:
    """Shape → Gather → Unsqueeze → Concat feeding a Reshape: computable before inference when
    the input's dims are fixed, so those nodes are folded, not engine nodes; the same chain on
    a dynamic batch runs."""

    def model(batch: int | str) -> bytes:
        return make_model(
            [
                helper.make_node("Shape", ["x"], ["shape"]),
                helper.make_node("Gather", ["shape", "zero"], ["n"], axis=0),
                helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
                helper.make_node("Concat", ["n1", "minus_one"], ["target"], axis=0),
                helper.make_node("Reshape", ["x", "target"], ["y"]),
            ],
            [fp32("x", [batch, 3, 4, 4])],
            [fp32("y", [batch, 48])],
            [ints("zero", []), ints("axes0", [0]), ints("minus_one", [-1])],
        )

    static = analyze(model(2), "10.1", use_tensorrt=False)
    assert [n.placement for n in static.nodes] == ["folded"] * 4 + ["GPU#1"]
    assert static.rates.nodes_total == 1
    dynamic = analyze(model("batch"), "10.1", use_tensorrt=False)
    assert all(n.placement == "GPU#1" for n in dynamic.nodes)


# --- restrictions, per release ----------------------------------------------------------------


def test_squeeze_axes_must_be_an_initializer_not_a_folded_tensor() -> None:
    """``builtin_op_importers.cpp`` at release/8.5-GA and release/8.6-GA, ``onnxOpImporters.cpp``
    at release/10.1-GA, Squeeze: ``assertIsWeights(inputs.at(1), "Squeeze axes input must be an
    initializer!")``. No importer of those releases returns weights for Cast of weights, so axes
    cast from an initializer are a tensor to the parser."""
    model = make_model(
        [
            helper.make_node("Cast", ["axes32"], ["axes"], to=TensorProto.INT64),
            helper.make_node("Squeeze", ["x", "axes"], ["a"]),
            helper.make_node("Squeeze", ["x", "axes_init"], ["b"]),
        ],
        [fp32("x", [1, 4])],
        [fp32("a", [4]), fp32("b", [4])],
        [numpy_helper.from_array(np.array([0], np.int32), "axes32"), ints("axes_init", [0])],
    )
    for version in VERSIONS:
        _cast, computed, initializer = support_of(model, version)
        assert not computed.supported
        assert "axes" in (computed.reason or "")
        assert initializer.supported


def test_unsqueeze_and_slice_axes_must_be_known_values() -> None:
    """release/8.5-GA ``builtin_op_importers.cpp``, Unsqueeze: ``ASSERT(axesInput.allValuesKnown()
    && "Axes input for unsqueeze operation should be a constant tensor.")``, Slice: ``ASSERT(
    (axes.allValuesKnown()) && "This version of TensorRT does not support dynamic axes.")``; the
    same at release/8.6-GA and in ``onnxOpImporters.cpp`` at release/10.1-GA. A ``ShapeTensor``
    knows its values only when built from weights (``ShapeTensor.cpp``)."""
    model = make_model(
        [
            helper.make_node("Identity", ["axes_in"], ["axes"]),
            helper.make_node("Unsqueeze", ["x", "axes"], ["u"]),
            helper.make_node("Slice", ["x", "zero", "one", "axes"], ["s"]),
            helper.make_node("Unsqueeze", ["x", "axes_in"], ["u_ok"]),
        ],
        [fp32("x", [2, 3])],
        [fp32("u", None), fp32("s", None), fp32("u_ok", [1, 2, 3])],
        [ints("axes_in", [0]), ints("zero", [0]), ints("one", [1])],
    )
    for version in VERSIONS:
        _identity, unsqueeze, slice_, fine = support_of(model, version)
        assert not unsqueeze.supported
        assert not slice_.supported
        assert fine.supported


def test_reduce_axes_input_must_be_an_initializer() -> None:
    """``reduceTensor`` in ``onnx2trt_utils.cpp`` at release/8.5-GA and release/8.6-GA and in
    ``importerUtils.cpp`` at release/10.1-GA: ``ASSERT(inputAxes.is_weights() && "Axis input
    must be an initializer!")``."""
    model = make_model(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"])],
        [fp32("x", [2, 3]), helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
        [fp32("y", None)],
    )
    for version in VERSIONS:
        assert not support_of(model, version)[0].supported


def test_cumsum_axis_must_be_an_initializer() -> None:
    """CumSum at release/8.5-GA, release/8.6-GA (``builtin_op_importers.cpp``) and release/10.1-GA
    (``onnxOpImporters.cpp``): ``assertIsWeights(inputs.at(1), "Axis input for CumSum must be an
    initializer!")``."""
    model = make_model(
        [helper.make_node("CumSum", ["x", "axis"], ["y"])],
        [fp32("x", [2, 3]), helper.make_tensor_value_info("axis", TensorProto.INT64, [])],
        [fp32("y", [2, 3])],
    )
    for version in VERSIONS:
        assert not support_of(model, version)[0].supported


def test_dropout_training_mode_must_be_an_initializer() -> None:
    """Dropout at release/8.5-GA, release/8.6-GA (``builtin_op_importers.cpp``) and
    release/10.1-GA (``onnxOpImporters.cpp``): ``inputs.at(2).is_weights() && "This Version of
    TensorRT only supports the training_mode input as an initializer."``."""
    model = make_model(
        [helper.make_node("Dropout", ["x", "", "training"], ["y"])],
        [fp32("x", [2, 3]), helper.make_tensor_value_info("training", TensorProto.BOOL, [])],
        [fp32("y", [2, 3])],
    )
    for version in VERSIONS:
        assert not support_of(model, version)[0].supported


def test_pad_axes_input_is_refused_before_10_and_must_be_an_initializer_in_10_1() -> None:
    """Pad (opset 18 ``axes`` input): ``builtin_op_importers.cpp`` at release/8.5-GA and
    release/8.6-GA: ``ASSERT(false && "TensorRT does not support dynamic axes for pad!")`` for any
    ``axes`` input, even an initializer; ``onnxOpImporters.cpp`` at release/10.1-GA: "Currently,
    `axes` input is supported only as an initializer" (``if (inputs.at(3).is_weights())``)."""

    def pad(axes_is_initializer: bool) -> bytes:
        inputs = [fp32("x", [2, 3])]
        inits = [ints("pads", [1, 1])]
        if axes_is_initializer:
            inits.append(ints("axes", [1]))
        else:
            inputs.append(helper.make_tensor_value_info("axes", TensorProto.INT64, [1]))
        return make_model(
            [helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"])],
            inputs,
            [fp32("y", None)],
            inits,
            opset=18,
        )

    for version in ("8.5", "8.6"):
        refused = support_of(pad(True), version)[0]
        assert not refused.supported
        assert "TensorRT 10" in (refused.reason or "")
    assert support_of(pad(True), "10.1")[0].supported
    assert not support_of(pad(False), "10.1")[0].supported


# --- FLOPs at a stated shape ----------------------------------------------------------------


def test_minus_one_dims_give_non_negative_flops_at_a_named_default_shape() -> None:
    for shape in ([-1, 3, -1, -1], [-1, 3, "?", -1], ["batch", 3, "height", "width"]):
        report = analyze(dynamic_dims_cnn(shape), "10.1", use_tensorrt=False)
        assert report.rates.flops_total == flops_at(640, 640), shape
        assert report.rates.flops_at is not None
        assert "images=1x3x640x640" in report.rates.flops_at
        assert "images=1x3x640x640" in report.verdict.line
        assert not report.rates.flops_exact
        assert all(n.flops is None or n.flops >= 0 for n in report.nodes)


def test_a_fixed_dim_is_kept_and_only_the_open_ones_get_defaults() -> None:
    report = analyze(dynamic_dims_cnn([-1, 3, 48, -1]), "10.1", use_tensorrt=False)
    assert report.rates.flops_total == flops_at(48, 640)
    assert "images=1x3x48x640" in (report.rates.flops_at or "")


def test_the_profile_opt_shape_is_used_and_named_when_given() -> None:
    report = analyze(
        dynamic_dims_cnn([-1, 3, -1, -1]),
        "10.1",
        use_tensorrt=False,
        input_shapes={"images": (1, 3, 320, 256)},
    )
    assert report.rates.flops_total == flops_at(320, 256)
    assert report.rates.flops_at == "images=1x3x320x256 (the shape profile's opt)"
    assert "images=1x3x320x256" in report.verdict.line


def test_crossing_bytes_of_a_dynamic_tensor_are_counted_at_the_stated_shape() -> None:
    model = make_model(
        [
            helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]),
            helper.make_node("FancyOp", ["a"], ["y"], domain="com.example"),
        ],
        [fp32("x", [-1, 3, -1, -1])],
        [fp32("y", None)],
        [weights("w", [8, 3, 3, 3])],
    )
    crossing = analyze(model, "10.1", use_tensorrt=False).crossings[0]
    assert crossing.tensor == "a"
    assert crossing.bytes == 8 * 640 * 640 * 4
    assert not crossing.exact
