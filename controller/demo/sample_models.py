"""Sample ONNX models generated in code, with deterministic weights (nothing is downloaded).

- ``classifier``: a small CNN, 1x3x32x32 image → 10 class probabilities.
- ``anomaly``: a small MLP scorer, 1x16 sensor vector → one score in (0, 1).

Used by ``jetfleet demo``, the tests and the benchmarks.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
"""IR 8 / opset 17 load in every ONNX Runtime and TensorRT parser a JetPack 5.1+ device has."""


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array.astype(np.float32), name)


def _finish(graph: onnx.GraphProto, doc: str) -> bytes:
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="jetfleet.sample_models",
        doc_string=doc,
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    data: bytes = model.SerializeToString()
    return data


def classifier(seed: int = 7, classes: int = 10) -> bytes:
    """A small CNN classifier: Conv-Relu-MaxPool-Conv-Relu-GAP-Gemm-Softmax."""
    rng = np.random.default_rng(seed)
    inits = [
        _init("conv1_w", rng.normal(0, 0.2, (8, 3, 3, 3))),
        _init("conv1_b", rng.normal(0, 0.05, (8,))),
        _init("conv2_w", rng.normal(0, 0.2, (16, 8, 3, 3))),
        _init("conv2_b", rng.normal(0, 0.05, (16,))),
        _init("fc_w", rng.normal(0, 0.3, (classes, 16))),
        _init("fc_b", rng.normal(0, 0.05, (classes,))),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv1_w", "conv1_b"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2_w", "conv2_b"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "classifier",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, classes])],
        initializer=inits,
    )
    return _finish(graph, "Jetfleet sample CNN classifier (deterministic weights).")


def anomaly(seed: int = 11, features: int = 16, hidden: int = 32) -> bytes:
    """A small MLP anomaly scorer: Gemm-Relu-Gemm-Sigmoid."""
    rng = np.random.default_rng(seed)
    inits = [
        _init("w1", rng.normal(0, 0.3, (features, hidden))),
        _init("b1", rng.normal(0, 0.05, (hidden,))),
        _init("w2", rng.normal(0, 0.3, (hidden, 1))),
        _init("b2", rng.normal(0, 0.05, (1,))),
    ]
    nodes = [
        helper.make_node("Gemm", ["features", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("Gemm", ["hr", "w2", "b2"], ["z"]),
        helper.make_node("Sigmoid", ["z"], ["score"]),
    ]
    graph = helper.make_graph(
        nodes,
        "anomaly",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, features])],
        [helper.make_tensor_value_info("score", TensorProto.FLOAT, [1, 1])],
        initializer=inits,
    )
    return _finish(graph, "Jetfleet sample MLP anomaly scorer (deterministic weights).")


SAMPLES: dict[str, Callable[[], bytes]] = {"classifier": classifier, "anomaly": anomaly}
"""Sample name → generator, as ``jetfleet demo`` pushes them."""
