"""The QDQ families of :mod:`tests.model_families`: a small CNN quantized by ONNX Runtime's own
``quantize_static`` (QDQ format), as public INT8 models are made. See that module's docstring."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np
import onnx

from tests.model_corpus import _Graph
from tests.model_families import FLOAT, FamilyModel, _build, _vi


def _small_cnn(seed: int) -> onnx.ModelProto:
    """Conv+Relu+Conv+GlobalAveragePool+Flatten+Gemm on ``[1, 3, 32, 32]``, biases everywhere."""
    g = _Graph(seed)
    x = "image"
    for i, (cin, cout) in enumerate([(3, 8), (8, 8)]):
        w, b = g.weights(f"conv{i}_w", [cout, cin, 3, 3]), g.weights(f"conv{i}_b", [cout])
        x = g.node("Conv", [x, w, b], f"conv{i}", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        if i == 0:
            x = g.node("Relu", [x], "relu0")
    flat = g.node("Flatten", [g.node("GlobalAveragePool", [x], "pool")], "flat", axis=1)
    w, b = g.weights("fc_w", [10, 8]), g.weights("fc_b", [10])
    g.node("Gemm", [flat, w, b], "logits", transB=1)
    data = _build(g, [_vi("image", FLOAT, [1, 3, 32, 32])], [_vi("logits", FLOAT, [1, 10])], 13)
    return onnx.load_model_from_string(data)


def _qdq(name: str, per_channel: bool, seed: int, symmetric: bool = False) -> FamilyModel:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Batches(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            rng = np.random.default_rng(seed)
            shape = (1, 3, 32, 32)
            self.batches = [{"image": rng.standard_normal(shape, np.float32)} for _ in range(4)]

        def get_next(self) -> dict[str, np.ndarray] | None:
            return self.batches.pop() if self.batches else None

    # quantize_static advises "pre-processing" on the root logger: silenced while it runs
    root, quiet = logging.getLogger(), logging.Filter("quantize")
    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "float.onnx", Path(tmp) / "qdq.onnx"
        onnx.save_model(_small_cnn(seed), str(source))
        root.addFilter(quiet)
        try:
            quantize_static(
                source,
                target,
                Batches(),
                quant_format=QuantFormat.QDQ,
                per_channel=per_channel,
                activation_type=QuantType.QInt8,
                weight_type=QuantType.QInt8,
                extra_options={"ActivationSymmetric": symmetric, "WeightSymmetric": symmetric},
            )
        finally:
            root.removeFilter(quiet)
        data = target.read_bytes()
    family = "int8 QDQ model quantized by ONNX Runtime (int32 biases through DequantizeLinear)"
    if symmetric:
        family = family[:-1] + ", symmetric: zero points 0, as TensorRT takes them)"
    return FamilyModel(name, data, family, {"image": (1, 3, 32, 32)})


def qdq_int8(seed: int = 15) -> FamilyModel:
    """The small CNN quantized per tensor (``per_channel=False``)."""
    return _qdq("qdq_int8", False, seed)


def qdq_int8_per_channel(seed: int = 15) -> FamilyModel:
    """The small CNN quantized per channel (``per_channel=True``)."""
    return _qdq("qdq_int8_per_channel", True, seed)


def qdq_int8_symmetric(seed: int = 15) -> FamilyModel:
    """The small CNN quantized per channel with symmetric activations and weights (zero points
    0: what TensorRT's INT8 takes; the quantizer's default zero points are not 0)."""
    return _qdq("qdq_int8_symmetric", True, seed, symmetric=True)
