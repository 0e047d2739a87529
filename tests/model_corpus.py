"""A corpus of small ONNX models of the kinds public model zoos hold, generated in code.

Built for classes of model, not for any list of real ones:

* :func:`caffe2_ir3`: IR version 3, opset 9 as converted from Caffe2: every initializer listed in
  ``graph.input``, Conv/BatchNormalization parameters made by ConstantOfShape from ``..._SHAPE``
  initializers, tensor names with ``/``;
* :func:`conv_net`: the same network at opsets 7 to the newest ``onnx`` knows, each at the IR
  version that opset shipped with (IR 3 keeps its initializers in ``graph.input``);
* :func:`dynamic_image`: dynamic batch, height and width (named and unnamed dims), two outputs;
* :func:`mixed_types`: several int64/bool/fp16 inputs and outputs whose names hold ``/``, ``:``
  and spaces.

Each model runs in ONNX Runtime on any input of its declared shape with dynamic dims set to 1.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

NEWEST_OPSET = onnx.defs.onnx_opset_version()
OPSETS = (7, 9, 11, 13, 17, NEWEST_OPSET)


@dataclass(frozen=True)
class CorpusModel:
    """One generated model: a name for test ids and its serialized bytes; ``push``: what an
    operator pushes when that differs (an archive of the .onnx and its external data)."""

    name: str
    data: bytes
    push: bytes | None = None


def ir_version_of(opset: int) -> int:
    """The IR version the ``onnx`` release that introduced ``opset`` wrote."""
    for _release, ir, ai_onnx, *_ in helper.VERSION_TABLE:
        if ai_onnx >= opset:
            return int(ir)
    return int(onnx.IR_VERSION)


class _Graph:
    """Nodes, initializers and (for IR 3) the initializers' graph.input entries."""

    def __init__(self, seed: int) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)

    def const(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def weights(self, name: str, shape: Sequence[int], filled: float | None = None) -> str:
        """Random weights as an initializer; ``filled``: made by ConstantOfShape instead."""
        if filled is None:
            return self.const(name, self.rng.standard_normal(shape).astype(np.float32) * 0.2)
        self.const(f"{name}__SHAPE", np.array(shape, np.int64))
        value = numpy_helper.from_array(np.array([filled], np.float32))
        self.nodes.append(
            helper.make_node("ConstantOfShape", [f"{name}__SHAPE"], [name], value=value)
        )
        return name

    def node(self, op: str, inputs: Sequence[str], output: str, **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op, list(inputs), [output], **attrs))
        return output

    def model(
        self,
        inputs: Sequence[onnx.ValueInfoProto],
        outputs: Sequence[onnx.ValueInfoProto],
        opset: int,
        ir_version: int,
    ) -> bytes:
        listed = list(inputs)
        if ir_version < 4:  # IR 3: every initializer is also a graph input
            listed += [
                helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                for t in self.initializers
            ]
        graph = helper.make_graph(self.nodes, "corpus", listed, list(outputs), self.initializers)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="jetfleet-corpus"
        )
        model.ir_version = ir_version
        onnx.checker.check_model(model)
        return bytes(model.SerializeToString())


def _conv_block(g: _Graph, x: str, prefix: str, cin: int, cout: int, computed: bool) -> str:
    """Conv → BatchNormalization → Relu; BN parameters from ConstantOfShape when ``computed``."""
    w = g.weights(f"{prefix}_w_0", [cout, cin, 3, 3])
    y = g.node("Conv", [x, w], f"{prefix}_1", pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    fill = {"s": 1.5, "b": 0.25, "rm": 0.1, "riv": 2.0}
    if computed:
        params = [g.weights(f"{prefix}_bn_{p}_0", [cout], filled=v) for p, v in fill.items()]
    else:
        params = [
            g.const(f"{prefix}_bn_{p}_0", np.full(cout, v, np.float32)) for p, v in fill.items()
        ]
    y = g.node("BatchNormalization", [y, *params], f"{prefix}_bn_1", epsilon=1e-5)
    return g.node("Relu", [y], f"{prefix}_2")


def _head(g: _Graph, x: str, prefix: str, features: int, classes: int, opset: int) -> str:
    pooled = g.node("GlobalAveragePool", [x], f"{prefix}pool_1")
    flat = g.node("Flatten", [pooled], f"{prefix}flat_1", axis=1)
    w = g.weights(f"{prefix}fc_w_0", [classes, features])
    b = g.weights(f"{prefix}fc_b_0", [classes])
    logits = g.node("Gemm", [flat, w, b], f"{prefix}fc_1", transB=1)
    if opset < 13:
        return g.node("Softmax", [logits], f"{prefix}softmax_1", axis=1)
    return g.node("Softmax", [logits], f"{prefix}softmax_1", axis=-1)


def caffe2_ir3(seed: int = 0) -> CorpusModel:
    """IR 3 / opset 9, as converted from Caffe2: ``gpu_0/data_0`` in, ``gpu_0/softmax_1`` out."""
    g = _Graph(seed)
    x = _conv_block(g, "gpu_0/data_0", "gpu_0/conv1", 3, 8, computed=True)
    x = _conv_block(g, x, "gpu_0/res2_0_branch1", 8, 8, computed=True)
    out = _head(g, x, "gpu_0/", 8, 10, 9)
    data = g.model(
        [helper.make_tensor_value_info("gpu_0/data_0", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 10])],
        opset=9,
        ir_version=3,
    )
    return CorpusModel("caffe2-ir3-opset9", data)


def conv_net(opset: int, seed: int = 1) -> CorpusModel:
    """A conv classifier at ``opset`` and its IR version; ConstantOfShape weights from opset 9."""
    g = _Graph(seed)
    x = _conv_block(g, "image", "conv1", 3, 4, computed=opset >= 9)
    out = _head(g, x, "", 4, 5, opset)
    ir = ir_version_of(opset)
    data = g.model(
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 5])],
        opset=opset,
        ir_version=ir,
    )
    return CorpusModel(f"conv-opset{opset}-ir{ir}", data)


def dynamic_image(seed: int = 2) -> CorpusModel:
    """Input ``images`` ``[batch, 3, ?, width]`` (height unnamed); outputs scores and features."""
    g = _Graph(seed)
    x = _conv_block(g, "images", "stem", 3, 4, computed=True)
    features = g.node("GlobalAveragePool", [x], "features/pooled")
    flat = g.node("Flatten", [features], "features", axis=1)
    w, b = g.weights("fc/w", [3, 4]), g.weights("fc/b", [3])
    scores = g.node("Gemm", [flat, w, b], "scores", transB=1)
    data = g.model(
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, None, "width"])],
        [
            helper.make_tensor_value_info(scores, TensorProto.FLOAT, ["batch", 3]),
            helper.make_tensor_value_info(flat, TensorProto.FLOAT, ["batch", 4]),
        ],
        opset=13,
        ir_version=ir_version_of(13),
    )
    return CorpusModel("dynamic-batch-height-width", data)


def mixed_types(seed: int = 3) -> CorpusModel:
    """int64 ``input/ids:0``, bool ``attention mask``, fp16 ``half:x`` (all ``[batch, 4]``) in;
    FP32 ``out/score:0``, INT64 ``out count`` and FP16 ``out/half`` out."""
    g = _Graph(seed)
    ids = g.node("Cast", ["input/ids:0"], "ids_f", to=TensorProto.FLOAT)
    mask = g.node("Cast", ["attention mask"], "mask_f", to=TensorProto.FLOAT)
    half = g.node("Cast", ["half:x"], "half_f", to=TensorProto.FLOAT)
    w = g.weights("proj/w", [4, 2])
    mixed = g.node("Add", [g.node("Mul", [ids, mask], "masked"), half], "mixed")
    g.node("MatMul", [mixed, w], "out/score:0")
    counts = g.node("Cast", ["attention mask"], "mask_i", to=TensorProto.INT64)
    axes = g.const("axes", np.array([1], np.int64))
    g.node("ReduceSum", [counts, axes], "out count", keepdims=0)
    g.node("Mul", ["half:x", "half:x"], "out/half")
    data = g.model(
        [
            helper.make_tensor_value_info("input/ids:0", TensorProto.INT64, ["batch", 4]),
            helper.make_tensor_value_info("attention mask", TensorProto.BOOL, ["batch", 4]),
            helper.make_tensor_value_info("half:x", TensorProto.FLOAT16, ["batch", 4]),
        ],
        [
            helper.make_tensor_value_info("out/score:0", TensorProto.FLOAT, ["batch", 2]),
            helper.make_tensor_value_info("out count", TensorProto.INT64, ["batch"]),
            helper.make_tensor_value_info("out/half", TensorProto.FLOAT16, ["batch", 4]),
        ],
        opset=13,
        ir_version=ir_version_of(13),
    )
    return CorpusModel("mixed-types-odd-names", data)


def external_data(seed: int = 5) -> CorpusModel:
    """A conv classifier saved as exports of large models are: ``model.onnx`` with every weight in
    ``weights/data.bin`` beside it, pushed as a .tar.gz of that folder (``push``); ``data`` is the
    same model with its weights inline, for ONNX Runtime run directly."""
    base = conv_net(13, seed=seed)
    model = onnx.load_model_from_string(base.data)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "export"
        (folder / "weights").mkdir(parents=True)
        onnx.save_model(
            model,
            str(folder / "model.onnx"),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location="weights/data.bin",
            size_threshold=0,
        )
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode="w:gz") as tar:
            tar.add(folder, arcname="export")
    return CorpusModel("external-data-tar-gz", base.data, packed.getvalue())


def corpus() -> list[CorpusModel]:
    """Every model of the corpus."""
    return [
        caffe2_ir3(),
        *(conv_net(opset) for opset in OPSETS),
        dynamic_image(),
        mixed_types(),
        external_data(),
    ]


def reflect_pad_rate(seed: int = 4) -> CorpusModel:
    """A voice-activity-detector-like front end: ``input`` ``[batch, sequence]`` reflect-padded
    over the dynamic ``sequence`` (ONNX Runtime refuses a sequence of 1: "Pad reflect requires
    axis length >= 2") and a scalar int64 ``sr`` whose hop ``sr // 8000`` is a Slice step
    (ONNX Runtime refuses anything below 8000: "'step' value cannot be 0"); output ``frames``
    ``[batch, ?]``, scaled by a weight. Runs with e.g. ``input`` 1x512 and ``sr`` 16000.

    Not in :func:`corpus`: it does not run with dynamic dims 1 and random values, by design."""
    g = _Graph(seed)
    pads = g.const("pads", np.array([0, 1, 0, 1], np.int64))
    padded = g.node("Pad", ["input", pads], "padded", mode="reflect")
    hop = g.node("Div", ["sr", g.const("rate_unit", np.array(8000, np.int64))], "hop")
    steps = g.node("Unsqueeze", [hop, g.const("axis0", np.array([0], np.int64))], "steps")
    starts, ends = g.const("starts", np.array([0], np.int64)), g.const("ends", np.array([2**62]))
    axes = g.const("axes", np.array([1], np.int64))
    framed = g.node("Slice", [padded, starts, ends, axes, steps], "framed")
    g.node("Mul", [framed, g.const("gain", np.array([0.5], np.float32))], "frames")
    data = g.model(
        [
            helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", "sequence"]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("frames", TensorProto.FLOAT, ["batch", None])],
        opset=13,
        ir_version=ir_version_of(13),
    )
    return CorpusModel("reflect-pad-sample-rate", data)
