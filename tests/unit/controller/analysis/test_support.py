"""Per-node support: the operator table plus the restrictions that can be checked statically."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from controller.analysis.graph import load_graph
from controller.analysis.ops_table import load_ops_table
from controller.analysis.support import NodeSupport, node_support
from tests.analysis_models import custom, fp32, ints, make_model, weights


def support_of(model: bytes, version: str = "10.1") -> list[NodeSupport]:
    return node_support(load_graph(model), load_ops_table(), version)


def test_conv_with_weights_and_bias_computed_at_run_time_goes_to_tensorrt() -> None:
    """onnx-tensorrt ``builtin_op_importers.cpp`` at release/8.5-GA and release/8.6-GA,
    ``onnxOpImporters.cpp`` at release/10.1-GA, Conv importer: ``if (inputs.at(1).is_tensor() ||
    (inputs.size() > 2 && inputs.at(2).is_tensor()))`` → ``convMultiInput`` ("Handle dynamic
    weights convolution"); ConvTranspose takes a tensor kernel and bias the same way
    (``kernelTensorPtr = inputs.at(1).is_tensor() ? ...``). Only 8.4 and older asserted on a
    computed bias, and those are not in the table."""
    model = make_model(
        [
            helper.make_node("Relu", ["w_in"], ["w"]),
            helper.make_node("Relu", ["b_in"], ["b"]),
            helper.make_node("Conv", ["x", "w", "b"], ["y"]),
            helper.make_node("ConvTranspose", ["y", "w_t"], ["z"]),
        ],
        [
            fp32("x", [1, 3, 8, 8]),
            fp32("w_in", [4, 3, 3, 3]),
            fp32("b_in", [4]),
            fp32("w_t", [4, 2, 3, 3]),
        ],
        [fp32("z", [1, 2, 8, 8])],
    )
    for version in ("8.5", "8.6", "10.1"):
        assert all(s.supported for s in support_of(model, version)), version


def test_conv_weights_from_a_constant_or_a_dequantized_initializer_are_fine() -> None:
    q = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.int8), "wq")
    scale = numpy_helper.from_array(np.array(0.1, np.float32), "scale")
    model = make_model(
        [
            helper.make_node("Constant", [], ["w_const"], value=weights("v", [4, 3, 3, 3])),
            helper.make_node("Conv", ["x", "w_const"], ["a"]),
            helper.make_node("DequantizeLinear", ["wq", "scale"], ["w_dq"]),
            helper.make_node("Conv", ["x", "w_dq"], ["b"]),
        ],
        [fp32("x", [1, 3, 8, 8])],
        [fp32("a", [1, 4, 6, 6]), fp32("b", [1, 4, 6, 6])],
        [q, scale],
    )
    assert all(s.supported for s in support_of(model))


def test_resize_modes_outside_the_supported_set_are_named() -> None:
    def resize(**attrs: Any) -> NodeSupport:
        model = make_model(
            [helper.make_node("Resize", ["x", "", "scales"], ["y"], **attrs)],
            [fp32("x", [1, 3, 8, 8])],
            [fp32("y", [1, 3, 16, 16])],
            [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")],
        )
        return support_of(model)[0]

    assert resize(mode="nearest").supported
    assert resize(mode="linear", coordinate_transformation_mode="align_corners").supported
    cubic = resize(mode="cubic")
    assert not cubic.supported
    assert "cubic" in (cubic.reason or "")
    crop = resize(mode="linear", coordinate_transformation_mode="tf_crop_and_resize")
    assert "tf_crop_and_resize" in (crop.reason or "")
    assert not resize(mode="linear", antialias=1).supported


def test_axes_must_be_known_before_inference() -> None:
    model = make_model(
        [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Slice", ["shape", "zero", "one"], ["axis_dyn"]),
            helper.make_node("Unsqueeze", ["x", "axis_dyn"], ["u_dyn"]),
            helper.make_node("Unsqueeze", ["x", "axes0"], ["u_init"]),
            helper.make_node("Squeeze", ["u_init", "axes0"], ["s"]),
            helper.make_node("Slice", ["x", "zero", "one", "axis_dyn"], ["sl_dyn"]),
        ],
        [fp32("x", [2, 3])],
        [fp32("u_dyn", None), fp32("s", [2, 3]), fp32("sl_dyn", None)],
        [ints("zero", [0]), ints("one", [1]), ints("axes0", [0])],
    )
    by_output = {s.index: s for s in support_of(model)}
    assert not by_output[2].supported
    assert "axes" in (by_output[2].reason or "")
    assert by_output[3].supported
    assert by_output[4].supported
    assert not by_output[5].supported
    assert by_output[1].supported  # Slice without an axes input


def _topk(k_as_input: bool, k: int = 5, version: str = "10.1") -> NodeSupport:
    inputs = [fp32("x", [1, 5000])]
    inits = []
    if k_as_input:
        inputs.append(helper.make_tensor_value_info("k", TensorProto.INT64, [1]))
    else:
        inits = [ints("k", [k])]
    model = make_model(
        [helper.make_node("TopK", ["x", "k"], ["v", "i"])],
        inputs,
        [fp32("v", None), helper.make_tensor_value_info("i", TensorProto.INT64, None)],
        inits,
    )
    return support_of(model, version)[0]


def test_topk_k_must_be_below_3840() -> None:
    assert _topk(False).supported
    assert "3840" in (_topk(False, k=4000).reason or "")


def test_topk_k_computed_at_run_time_only_8_5_refuses() -> None:
    """onnx-tensorrt ``builtin_op_importers.cpp`` at release/8.5-GA, TopK: ``assertIsWeights(
    inputs.at(1), "This version of TensorRT only supports input K as an initializer.")``; at
    release/8.6-GA (same file) and release/10.1-GA (``onnxOpImporters.cpp``) the importer no
    longer asserts and passes a tensor K to the TopK layer."""
    old = _topk(True, version="8.5")
    assert not old.supported
    assert "K" in (old.reason or "")
    assert _topk(True, version="8.6").supported
    assert _topk(True, version="10.1").supported


def test_pooling_must_be_2d_or_3d() -> None:
    def pool(kernel: list[int], shape: list[int]) -> NodeSupport:
        model = make_model(
            [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=kernel)],
            [fp32("x", shape)],
            [fp32("y", None)],
        )
        return support_of(model)[0]

    assert pool([2, 2], [1, 3, 8, 8]).supported
    assert pool([2, 2, 2], [1, 3, 8, 8, 8]).supported
    one_d = pool([2], [1, 3, 8])
    assert not one_d.supported
    assert "1D pooling" in (one_d.reason or "")


def test_an_op_of_10_1_is_unknown_to_8_5_and_says_where_it_arrived() -> None:
    model = make_model(
        [helper.make_node("Hardmax", ["x"], ["y"])], [fp32("x", [1, 4])], [fp32("y", [1, 4])]
    )
    assert support_of(model, "10.1")[0].supported
    old = support_of(model, "8.5")[0]
    assert not old.supported
    assert old.kind == "unsupported_op"
    assert "supported from TensorRT 10.1" in (old.reason or "")


def test_custom_domain_and_unlisted_ops_are_unsupported() -> None:
    model = make_model(
        [custom(["x"], ["a"]), helper.make_node("Unique", ["a"], ["y"])],
        [fp32("x", [4])],
        [fp32("y", None)],
        value_info=[fp32("a", [4])],
    )
    fancy, unique = support_of(model)
    assert fancy.kind == "custom_op"
    assert "com.example::FancyOp" in (fancy.reason or "")
    assert not unique.supported


def test_double_precision_inputs_are_outside_the_10_1_types() -> None:
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [4])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4])],
    )
    relu = support_of(model)[0]
    assert relu.kind == "data_type"
    assert "FP64" in (relu.reason or "")
