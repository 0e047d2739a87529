"""Generated ONNX models of the *families* of public models that break TensorRT.

Each is small (a few layers, a TensorRT build of seconds), valid (``onnx.checker`` with
``full_check``) and runs in ONNX Runtime's CPU provider on :func:`feeds`. One function a family:

* :func:`if_branch_shapes`: a voice activity detector like Silero VAD: ``input`` audio ``[1, N]``
  and an int64 scalar ``sr``; an ``If`` on ``sr == 16000`` whose branches slice ``[1, 512]`` and
  ``[1, 256]`` chunks. TensorRT 8.6 refuses it: "IIfConditionalOutputLayer inputs must have the
  same shape".
* :func:`slice_computed_axes`: the same kind of model at opset 15, a ``Slice`` whose axes, starts
  and ends are computed (Shape/Gather/Sub, a Constant through Identity and Cast), not
  initializers. TensorRT 8.x refuses it: "This version of TensorRT does not support dynamic axes".
* :func:`opset18_plain`: an opset 18 audio model without ``If``: Pad and ReduceMean with their
  axes as inputs (the opset 18 forms), a Conv1d and a MatMul, dynamic length.
* :func:`nms_detector` / :func:`nms_detector_empty`: a tiny detector (SSD/YOLO exports with NMS):
  Conv heads, ``NonMaxSuppression`` and the kept boxes gathered; outputs of data-dependent first
  dim (none kept in the ``_empty`` variant: ``[0, 3]`` and ``[0, 4]``).
* :func:`nonzero`: ``NonZero`` of ``x > 0``, a data-dependent ``[n, rank]`` output.
* :func:`qdq_int8` / :func:`qdq_int8_per_channel` / :func:`qdq_int8_symmetric`: a small CNN
  quantized by ONNX Runtime's ``quantize_static`` (QDQ); its int32 biases go through
  ``DequantizeLinear`` ("DequantizeLinear: only activation types allowed as input to this
  layer" on 8.x, which the agent folds away). Its default zero points are not 0, which TensorRT
  refuses ("TRT only supports symmetric quantization", real 8.5.2); the symmetric one has 0.
* :func:`anonymous_dims`: a PaddleOCR-classifier-like model whose every unknown dim is named
  ``"?"`` (input ``[?, 3, ?, ?]``, output ``[?, 2]``); TensorRT ties equal dim names, so pushing
  ``1x3x48x192`` is refused: "Input dimensions with this name are inconsistent".
* :func:`lstm_gru`: an LSTM then a GRU over ``[time, 1, 8]``.
* :func:`recurrent`: one LSTM, GRU or RNN alone (not in :func:`families`: the tactic-source
  tests build each under every set of disabled tactic sources).
* :func:`fp16_io`: float16 inputs, outputs and arithmetic, static shape.
* :func:`shape_tensor_input`: an int64 input ``shape`` (a host-side shape tensor) consumed by
  Reshape and ConstantOfShape; valid only with ``shape`` = ``arrays["shape"]`` (``[4, 6]``,
  whose product is the 24 values of ``data``).
* :func:`classic_cnn`: a static Conv/BatchNorm/Relu/MaxPool/Gemm classifier, the control case
  that builds everywhere.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.model_corpus import _conv_block, _Graph, _head, ir_version_of

_vi = helper.make_tensor_value_info
FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


@dataclass(frozen=True)
class FamilyModel:
    """One model of a family: ``shapes``: the concrete shape of every input (what an operator
    pushes with ``--shape``); ``values``: scalar inputs' values; ``arrays``: 1-D int inputs'
    values (shape tensors); other inputs take any (random) values."""

    name: str
    data: bytes
    family: str
    shapes: dict[str, tuple[int, ...]]
    values: dict[str, int | float] = field(default_factory=dict)
    arrays: dict[str, list[int]] = field(default_factory=dict)


def feeds(model: FamilyModel) -> dict[str, np.ndarray]:
    """Inputs of ``model.shapes``: given values where the model needs them, else seeded random
    data (the same for the same model name)."""
    rng = np.random.default_rng(zlib.crc32(model.name.encode()))
    graph = onnx.load_model_from_string(model.data).graph
    out: dict[str, np.ndarray] = {}
    for value in graph.input:
        dtype = helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        shape = model.shapes[value.name]
        if value.name in model.values:
            out[value.name] = np.full(shape, model.values[value.name], dtype)
        elif value.name in model.arrays:
            out[value.name] = np.array(model.arrays[value.name], dtype).reshape(shape)
        elif np.issubdtype(dtype, np.floating):
            out[value.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            out[value.name] = rng.random(shape) < 0.5
        else:
            out[value.name] = rng.integers(0, 4, shape).astype(dtype)
    return out


def _build(
    g: _Graph,
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    opset: int,
) -> bytes:
    return g.model(inputs, outputs, opset=opset, ir_version=ir_version_of(opset))


def _i64(g: _Graph, name: str, values: int | Sequence[int]) -> str:
    return g.const(name, np.array(values, np.int64))


def _f32(g: _Graph, name: str, values: float | Sequence[float]) -> str:
    return g.const(name, np.array(values, np.float32))


def _constant(name: str, values: Sequence[int]) -> onnx.NodeProto:
    tensor = numpy_helper.from_array(np.array(values, np.int64), name)
    return helper.make_node("Constant", [], [name], value=tensor)


def _chunk_branch(name: str, length: int) -> onnx.GraphProto:
    """An If branch: the first ``length`` samples of the outer ``input``, ``[1, length]``."""
    limits = {f"{name}_starts": [0], f"{name}_ends": [length], f"{name}_axes": [1]}
    nodes = [_constant(k, v) for k, v in limits.items()]
    nodes.append(helper.make_node("Slice", ["input", *limits], [f"{name}_chunk"]))
    return helper.make_graph(nodes, name, [], [_vi(f"{name}_chunk", FLOAT, [1, length])])


def _vad_head(g: _Graph, chunk: str, opset: int) -> str:
    """Energy of ``chunk`` ``[1, n]`` (any n) → MatMul → Sigmoid: ``speech`` ``[1, 4]``."""
    energy = g.node("Mul", [chunk, chunk], "energy")
    if opset >= 18:
        mean = g.node("ReduceMean", [energy, _i64(g, "mean_axes", [1])], "mean", keepdims=1)
    else:
        mean = g.node("ReduceMean", [energy], "mean", axes=[1], keepdims=1)
    logits = g.node("MatMul", [mean, g.weights("head_w", [1, 4])], "logits")
    return g.node("Sigmoid", [logits], "speech")


_AUDIO = [_vi("input", FLOAT, [1, "N"]), _vi("sr", INT64, [])]
_AUDIO_PUSH = {"input": (1, 512), "sr": ()}


def if_branch_shapes(seed: int = 10) -> FamilyModel:
    """``If(sr == 16000)``: then a ``[1, 512]`` chunk, else a ``[1, 256]`` one; opset 16."""
    g = _Graph(seed)
    cond = g.node("Equal", ["sr", _i64(g, "rate16k", 16000)], "is_16k")
    chunk = g.node(
        "If",
        [cond],
        "chunk",
        then_branch=_chunk_branch("then", 512),
        else_branch=_chunk_branch("else", 256),
    )
    speech = _vad_head(g, chunk, 16)
    data = _build(g, _AUDIO, [_vi(speech, FLOAT, [1, 4]), _vi(chunk, FLOAT, [1, None])], 16)
    family = "voice activity detector (Silero VAD): If branches of different shapes"
    return FamilyModel("if_branch_shapes", data, family, _AUDIO_PUSH, {"sr": 16000})


def slice_computed_axes(seed: int = 11) -> FamilyModel:
    """The first half of ``input`` by a Slice whose axes (rank - 1), starts (a Constant through
    Identity and Cast) and ends (length // 2) are all computed; opset 15."""
    g = _Graph(seed)
    g.nodes.append(_constant("starts_const", [0]))
    starts = g.node("Cast", [g.node("Identity", ["starts_const"], "starts_id")], "starts", to=INT64)
    shape = g.node("Shape", ["input"], "input_shape")
    rank = g.node("Shape", [shape], "input_rank")
    axes = g.node("Sub", [rank, _i64(g, "one", [1])], "axes")
    length = g.node("Gather", [shape, _i64(g, "last", [1])], "length", axis=0)
    ends = g.node("Div", [length, _i64(g, "two", [2])], "ends")
    half = g.node("Slice", ["input", starts, ends, axes], "half")
    gain = g.node("Div", [g.node("Cast", ["sr"], "sr_f", to=FLOAT), _f32(g, "r", 16000)], "gain")
    speech = _vad_head(g, g.node("Mul", [half, gain], "scaled"), 15)
    data = _build(g, _AUDIO, [_vi(speech, FLOAT, [1, 4])], 15)
    family = "voice activity detector: Slice with computed (dynamic) axes"
    return FamilyModel("slice_computed_axes", data, family, _AUDIO_PUSH, {"sr": 16000})


def opset18_plain(seed: int = 12) -> FamilyModel:
    """Opset 18, no If: Unsqueeze → Pad (``axes`` input) → Conv1d → Relu → ReduceMean (``axes``
    input) → MatMul → Sigmoid over ``input`` ``[1, N]``."""
    g = _Graph(seed)
    x = g.node("Unsqueeze", ["input", _i64(g, "channel_axis", [1])], "audio")
    pads = [_i64(g, "pads", [1, 1]), _f32(g, "pad_value", 0.0), _i64(g, "pad_axes", [2])]
    padded = g.node("Pad", [x, *pads], "padded", mode="constant")
    conv = g.node("Conv", [padded, g.weights("conv_w", [4, 1, 3])], "conv", kernel_shape=[3])
    act = g.node("Relu", [conv], "act")
    pooled = g.node("ReduceMean", [act, _i64(g, "time_axes", [2])], "pooled", keepdims=0)
    logits = g.node("MatMul", [pooled, g.weights("fc_w", [4, 2])], "logits")
    speech = g.node("Sigmoid", [logits], "speech")
    data = _build(g, [_vi("input", FLOAT, [1, "N"])], [_vi(speech, FLOAT, [1, 2])], 18)
    return FamilyModel("opset18_plain", data, "opset 18 audio model", {"input": (1, 512)})


def _nms(name: str, score_threshold: float, seed: int) -> FamilyModel:
    g = _Graph(seed)
    feat = g.node(
        "Conv",
        ["images", g.weights("stem_w", [8, 3, 4, 4]), g.weights("stem_b", [8])],
        "stem",
        kernel_shape=[4, 4],
        strides=[4, 4],
    )
    feat = g.node("Relu", [feat], "stem_act")
    raw_boxes = g.node("Conv", [feat, g.weights("box_w", [4, 8, 1, 1])], "box_map")
    flat = g.node("Reshape", [raw_boxes, _i64(g, "box_shape", [1, 4, 256])], "box_flat")
    boxes = g.node("Sigmoid", [g.node("Transpose", [flat], "box_t", perm=[0, 2, 1])], "boxes")
    raw_scores = g.node("Conv", [feat, g.weights("cls_w", [3, 8, 1, 1])], "cls_map")
    flat = g.node("Reshape", [raw_scores, _i64(g, "cls_shape", [1, 3, 256])], "cls_flat")
    scores = g.node("Sigmoid", [flat], "scores")
    limits = [_i64(g, "max_per_class", [10]), _f32(g, "iou", [0.5])]
    limits.append(_f32(g, "score_threshold", [score_threshold]))
    kept = g.node("NonMaxSuppression", [boxes, scores, *limits], "selected_indices")
    index = g.node("Gather", [kept, _i64(g, "box_column", 2)], "box_index", axis=1)
    all_boxes = g.node("Squeeze", [boxes, _i64(g, "batch_axis", [0])], "all_boxes")
    detections = g.node("Gather", [all_boxes, index], "detection_boxes", axis=0)
    outputs = [_vi(kept, INT64, ["detections", 3]), _vi(detections, FLOAT, ["detections", 4])]
    data = _build(g, [_vi("images", FLOAT, [1, 3, 64, 64])], outputs, 13)
    family = "object detector with NonMaxSuppression (data-dependent outputs)"
    return FamilyModel(name, data, family, {"images": (1, 3, 64, 64)})


def nms_detector(seed: int = 13) -> FamilyModel:
    """Conv heads → NonMaxSuppression (score threshold 0.5: some detections) → kept boxes."""
    return _nms("nms_detector", 0.5, seed)


def nms_detector_empty(seed: int = 13) -> FamilyModel:
    """:func:`nms_detector` with a score threshold (1.5) no sigmoid score passes: zero rows."""
    return _nms("nms_detector_empty", 1.5, seed)


def nonzero(seed: int = 14) -> FamilyModel:
    """``positions`` ``[n, 3]`` = Transpose(NonZero(x > 0)); ``values`` ``[n]`` = x there."""
    g = _Graph(seed)
    positive = g.node("Greater", ["x", _f32(g, "zero", 0.0)], "positive")
    where = g.node("NonZero", [positive], "where")
    positions = g.node("Transpose", [where], "positions", perm=[1, 0])
    values = g.node("GatherND", ["x", positions], "values")
    outputs = [_vi(positions, INT64, ["n", 3]), _vi(values, FLOAT, ["n"])]
    data = _build(g, [_vi("x", FLOAT, ["batch", 4, 8])], outputs, 13)
    return FamilyModel("nonzero", data, "NonZero (data-dependent shape)", {"x": (2, 4, 8)})


def anonymous_dims(seed: int = 16) -> FamilyModel:
    """Input ``x`` ``[?, 3, ?, ?]`` (each unknown dim named ``"?"``), output ``[?, 2]``: Conv →
    BatchNorm → Relu → MaxPool → GlobalAveragePool → Flatten → Gemm → Softmax."""
    g = _Graph(seed)
    x = _conv_block(g, "x", "conv1", 3, 4, computed=False)
    pooled = g.node("MaxPool", [x], "maxpool", kernel_shape=[2, 2], strides=[2, 2])
    out = _head(g, pooled, "", 4, 2, 13)
    data = _build(g, [_vi("x", FLOAT, ["?", 3, "?", "?"])], [_vi(out, FLOAT, ["?", 2])], 13)
    family = "PaddleOCR-like classifier whose unknown dims are all named '?'"
    return FamilyModel("anonymous_dims", data, family, {"x": (1, 3, 48, 192)})


def lstm_gru(seed: int = 17) -> FamilyModel:
    """LSTM (hidden 16) → Squeeze → GRU (hidden 8) over ``x`` ``[time, 1, 8]``; outputs the GRU's
    ``sequence`` ``[time, 1, 1, 8]`` and last ``hidden`` ``[1, 1, 8]``."""
    g = _Graph(seed)
    lstm = [g.weights("lstm_w", [1, 64, 8]), g.weights("lstm_r", [1, 64, 16])]
    lstm.append(g.weights("lstm_b", [1, 128]))
    g.nodes.append(helper.make_node("LSTM", ["x", *lstm], ["lstm_y"], hidden_size=16))
    seq = g.node("Squeeze", ["lstm_y", _i64(g, "dir_axis", [1])], "lstm_seq")
    gru = [g.weights("gru_w", [1, 24, 16]), g.weights("gru_r", [1, 24, 8])]
    gru.append(g.weights("gru_b", [1, 48]))
    g.nodes.append(helper.make_node("GRU", [seq, *gru], ["sequence", "hidden"], hidden_size=8))
    data = _build(
        g,
        [_vi("x", FLOAT, ["time", 1, 8])],
        [_vi("sequence", FLOAT, ["time", 1, 1, 8]), _vi("hidden", FLOAT, [1, 1, 8])],
        14,
    )
    return FamilyModel("lstm_gru", data, "recurrent model: LSTM then GRU", {"x": (20, 1, 8)})


RECURRENT_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def recurrent(op: str, seed: int = 19) -> FamilyModel:
    """One ``op`` (LSTM, GRU or RNN; hidden 8) over ``x`` ``[time, 1, 8]``; outputs its
    ``sequence`` ``[time, 1, 1, 8]`` and last ``hidden`` ``[1, 1, 8]``."""
    g = _Graph(seed)
    gates = RECURRENT_GATES[op]
    inputs = [g.weights("w", [1, gates * 8, 8]), g.weights("r", [1, gates * 8, 8])]
    inputs.append(g.weights("b", [1, 2 * gates * 8]))
    g.nodes.append(helper.make_node(op, ["x", *inputs], ["sequence", "hidden"], hidden_size=8))
    data = _build(
        g,
        [_vi("x", FLOAT, ["time", 1, 8])],
        [_vi("sequence", FLOAT, ["time", 1, 1, 8]), _vi("hidden", FLOAT, [1, 1, 8])],
        14,
    )
    return FamilyModel(op.lower(), data, f"one {op}", {"x": (20, 1, 8)})


def fp16_io(seed: int = 18) -> FamilyModel:
    """float16 ``x`` ``[1, 16]`` → MatMul → Add → Relu → MatMul → float16 ``y`` ``[1, 4]``."""
    g = _Graph(seed)

    def half(name: str, shape: Sequence[int]) -> str:
        return g.const(name, (g.rng.standard_normal(shape) * 0.2).astype(np.float16))

    hidden = g.node("MatMul", ["x", half("w1", [16, 8])], "hidden")
    act = g.node("Relu", [g.node("Add", [hidden, half("b1", [8])], "biased")], "act")
    g.node("MatMul", [act, half("w2", [8, 4])], "y")
    f16 = TensorProto.FLOAT16
    data = _build(g, [_vi("x", f16, [1, 16])], [_vi("y", f16, [1, 4])], 13)
    return FamilyModel("fp16_io", data, "float16 inputs, outputs and compute", {"x": (1, 16)})


def shape_tensor_input() -> FamilyModel:
    """``out`` = Reshape(``data`` ``[1, 24]``, ``shape``) * 2 + ConstantOfShape(``shape``, 0.5);
    ``shape`` (int64 ``[2]``) must hold two dims of product 24: pushed as ``[4, 6]``."""
    g = _Graph(0)
    reshaped = g.node("Reshape", ["data", "shape"], "reshaped")
    half = numpy_helper.from_array(np.array([0.5], np.float32))
    offset = g.node("ConstantOfShape", ["shape"], "offset", value=half)
    scaled = g.node("Mul", [reshaped, _f32(g, "scale", 2.0)], "scaled")
    out = g.node("Add", [scaled, offset], "out")
    inputs = [_vi("data", FLOAT, [1, 24]), _vi("shape", INT64, [2])]
    data = _build(g, inputs, [_vi(out, FLOAT, [None, None])], 13)
    family = "host-side shape tensor input (Reshape / ConstantOfShape)"
    shapes = {"data": (1, 24), "shape": (2,)}
    return FamilyModel("shape_tensor_input", data, family, shapes, arrays={"shape": [4, 6]})


def classic_cnn(seed: int = 19) -> FamilyModel:
    """Static (Conv/BatchNorm/Relu/MaxPool) twice → GlobalAveragePool → Gemm → Softmax on
    ``[1, 3, 32, 32]``: the control case."""
    g = _Graph(seed)
    x = _conv_block(g, "image", "conv1", 3, 8, computed=False)
    x = g.node("MaxPool", [x], "pool1", kernel_shape=[2, 2], strides=[2, 2])
    x = _conv_block(g, x, "conv2", 8, 16, computed=False)
    out = _head(g, x, "", 16, 10, 13)
    data = _build(g, [_vi("image", FLOAT, [1, 3, 32, 32])], [_vi(out, FLOAT, [1, 10])], 13)
    return FamilyModel("classic_cnn", data, "plain static CNN (control)", {"image": (1, 3, 32, 32)})


def families() -> list[FamilyModel]:
    """One model of every family (two of NMS, three of QDQ: :mod:`tests.model_families_qdq`)."""
    from tests.model_families_qdq import qdq_int8, qdq_int8_per_channel, qdq_int8_symmetric

    return [
        if_branch_shapes(),
        slice_computed_axes(),
        opset18_plain(),
        nms_detector(),
        nms_detector_empty(),
        nonzero(),
        qdq_int8(),
        qdq_int8_per_channel(),
        qdq_int8_symmetric(),
        anonymous_dims(),
        lstm_gru(),
        fp16_io(),
        shape_tensor_input(),
        classic_cnn(),
    ]
