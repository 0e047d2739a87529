"""The model families that break TensorRT: each valid, run by ONNX Runtime on
its feeds, and structurally what it claims to be."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tests.model_families import FamilyModel, families, feeds

MODELS = {model.name: model for model in families()}


def _model(name: str) -> onnx.ModelProto:
    return onnx.load_model_from_string(MODELS[name].data)


def _opset(model: onnx.ModelProto) -> int:
    return int(next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")))


def _run(model: FamilyModel, inputs: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    session = ort.InferenceSession(model.data, providers=["CPUExecutionProvider"])
    return list(session.run(None, feeds(model) if inputs is None else inputs))


def _ops(model: onnx.ModelProto) -> list[str]:
    return [node.op_type for node in model.graph.node]


def _dims(value: onnx.ValueInfoProto) -> list[onnx.TensorShapeProto.Dimension]:
    return list(value.type.tensor_type.shape.dim)


def test_every_family_is_listed_once() -> None:
    assert len(MODELS) == 14
    assert {m.family for m in MODELS.values()} >= {"plain static CNN (control)"}


@pytest.mark.parametrize("name", MODELS)
def test_valid_small_and_runs_finite(name: str) -> None:
    model = MODELS[name]
    assert len(model.data) < 2 * 1024 * 1024
    proto = onnx.load_model_from_string(model.data)
    onnx.checker.check_model(proto, full_check=True)
    inputs = feeds(model)
    assert set(inputs) == set(model.shapes) == {value.name for value in proto.graph.input}
    for value in proto.graph.input:
        declared = _dims(value)
        pushed = model.shapes[value.name]
        assert len(declared) == len(pushed)
        assert all(d.dim_value in (0, n) for d, n in zip(declared, pushed, strict=True))
        assert inputs[value.name].shape == pushed
    outputs = _run(model)
    assert len(outputs) == len(proto.graph.output)
    assert all(np.isfinite(out).all() for out in outputs)


def test_feeds_are_deterministic() -> None:
    for model in MODELS.values():
        first, second = feeds(model), feeds(model)
        assert all(np.array_equal(first[k], second[k]) for k in first)


def test_if_branches_return_different_shapes() -> None:
    proto = _model("if_branch_shapes")
    assert 13 <= _opset(proto) <= 16
    (node,) = [n for n in proto.graph.node if n.op_type == "If"]
    branches = {a.name: a.g for a in node.attribute}
    shapes = {k: [d.dim_value for d in _dims(g.output[0])] for k, g in branches.items()}
    assert shapes == {"then_branch": [1, 512], "else_branch": [1, 256]}
    model = MODELS["if_branch_shapes"]
    inputs = feeds(model)
    assert _run(model, inputs)[1].shape == (1, 512)
    inputs["sr"] = np.array(8000, np.int64)
    assert _run(model, inputs)[1].shape == (1, 256)


def test_slice_axes_are_computed() -> None:
    proto = _model("slice_computed_axes")
    assert _opset(proto) == 15
    produced = {out for node in proto.graph.node for out in node.output}
    fixed = {t.name for t in proto.graph.initializer} | {v.name for v in proto.graph.input}
    (node,) = [n for n in proto.graph.node if n.op_type == "Slice"]
    starts, ends, axes = node.input[1:4]
    for name in (starts, ends, axes):
        assert name in produced
        assert name not in fixed
    producers = {out: node.op_type for node in proto.graph.node for out in node.output}
    assert producers[axes] != "Constant"
    assert producers[starts] == "Cast"


def test_opset18_uses_axes_inputs_and_no_if() -> None:
    proto = _model("opset18_plain")
    assert _opset(proto) == 18
    assert "If" not in _ops(proto)
    for node in proto.graph.node:
        if node.op_type in ("Pad", "ReduceMean"):
            assert node.input[-1].endswith("axes")
            assert not any(a.name == "axes" for a in node.attribute)


def test_nms_detector_keeps_some_boxes() -> None:
    assert "NonMaxSuppression" in _ops(_model("nms_detector"))
    kept, boxes = _run(MODELS["nms_detector"])
    assert kept.shape[0] > 0
    assert kept.shape[1] == 3
    assert boxes.shape == (kept.shape[0], 4)


def test_nms_detector_empty_keeps_none() -> None:
    proto = _model("nms_detector_empty")
    assert "NonMaxSuppression" in _ops(proto)
    assert all(_dims(out)[0].dim_param for out in proto.graph.output)
    kept, boxes = _run(MODELS["nms_detector_empty"])
    assert kept.shape == (0, 3)
    assert boxes.shape == (0, 4)


def test_nonzero_output_is_data_dependent() -> None:
    assert "NonZero" in _ops(_model("nonzero"))
    model = MODELS["nonzero"]
    x = feeds(model)["x"]
    positions, values = _run(model)
    assert positions.shape == (int((x > 0).sum()), 3)
    assert np.array_equal(values, x[x > 0])


@pytest.mark.parametrize("name", ["qdq_int8", "qdq_int8_per_channel", "qdq_int8_symmetric"])
def test_qdq_dequantizes_int32_biases(name: str) -> None:
    proto = _model(name)
    initializers = {t.name: t for t in proto.graph.initializer}
    dequantized = [
        initializers[n.input[0]]
        for n in proto.graph.node
        if n.op_type == "DequantizeLinear" and n.input[0] in initializers
    ]
    assert any(t.data_type == onnx.TensorProto.INT32 for t in dequantized)
    assert "QuantizeLinear" in _ops(proto)
    scales = [initializers[n.input[1]] for n in proto.graph.node if n.op_type == "DequantizeLinear"]
    per_channel = any(int(np.prod(t.dims)) > 1 for t in scales)
    assert per_channel == (name != "qdq_int8")
    points = [initializers[n.input[2]] for n in proto.graph.node if n.op_type == "QuantizeLinear"]
    symmetric = all(not onnx.numpy_helper.to_array(t).any() for t in points)
    assert symmetric == name.endswith("symmetric")  # TensorRT takes zero points of 0 only


def test_anonymous_dims_are_all_named_question_mark() -> None:
    proto = _model("anonymous_dims")
    (x,) = proto.graph.input
    unknown = [d for d in _dims(x) if not d.dim_value]
    assert len(unknown) == 3
    assert all(d.dim_param == "?" for d in unknown)
    assert any(d.dim_param == "?" for d in _dims(proto.graph.output[0]))
    _, _, height, width = MODELS["anonymous_dims"].shapes["x"]
    assert height != width


def test_lstm_gru_over_named_time() -> None:
    proto = _model("lstm_gru")
    assert {"LSTM", "GRU"} <= set(_ops(proto))
    assert _dims(proto.graph.input[0])[0].dim_param == "time"


def test_fp16_io() -> None:
    proto = _model("fp16_io")
    for value in [*proto.graph.input, *proto.graph.output]:
        assert value.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
        assert all(d.dim_value for d in _dims(value))
    assert _run(MODELS["fp16_io"])[0].dtype == np.float16


def test_shape_tensor_input_shapes_the_output() -> None:
    proto = _model("shape_tensor_input")
    consumers = {n.op_type for n in proto.graph.node if "shape" in n.input}
    assert consumers == {"Reshape", "ConstantOfShape"}
    model = MODELS["shape_tensor_input"]
    assert _run(model)[0].shape == tuple(model.arrays["shape"])


def test_classic_cnn_is_static() -> None:
    proto = _model("classic_cnn")
    assert {"Conv", "BatchNormalization", "Relu", "MaxPool", "Gemm"} <= set(_ops(proto))
    for value in [*proto.graph.input, *proto.graph.output]:
        assert all(d.dim_value for d in _dims(value))
