"""Models TensorRT 8.x refuses, rewritten before the build (agent/engines/onnx_rewrite.py).

- QDQ models from ONNX Runtime's quantizer: "DequantizeLinear: only activation types allowed as
  input to this layer" for the int32 biases; the constant DequantizeLinear nodes are folded.
- ``"?"`` dimension names: "Input dimensions with this name are inconsistent"; anonymous names,
  and shared names the profile gives different sizes, are renamed.

Outputs are compared with ONNX Runtime on CPU, graph optimisations off on both sides (ORT's QDQ
fusions would otherwise run the original in integer kernels and the folded one in float).
TensorRT itself does not run here: the build path is checked with a stand-in build child (this
module run as ``python -m``) in place of ``agent.trt_host.build_child``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from agent.engines import build_runner
from agent.engines.build_protocol import BuildRequest
from agent.engines.onnx_rewrite import (
    WireError,
    fold_constant_dequantize,
    prepare_for_tensorrt,
    prepared_onnx,
    rename_dim_params,
)
from agent.engines.trt_interpreter import Launch
from shared.delegate import DelegateConfig, ShapeProfile

REPO = Path(__file__).resolve().parents[3]
INT8, INT32 = TensorProto.INT8, TensorProto.INT32


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    inits: Sequence[onnx.TensorProto] = (),
) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _cnn() -> bytes:
    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.3, name)

    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["logits"], transB=1),
    ]
    inits = [
        weight("w1", 8, 3, 3, 3),
        weight("b1", 8),
        weight("w2", 4, 8, 3, 3),
        weight("b2", 4),
        weight("w3", 5, 4),
        weight("b3", 5),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5])],
        inits,
    )


def _quantized(tmp_path: Path, per_channel: bool) -> bytes:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(1)
            self._batches: Iterator[dict[str, np.ndarray]] = iter(
                [{"image": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}] * 8
            )

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._batches, None)

    source, target = tmp_path / "float.onnx", tmp_path / f"qdq-{per_channel}.onnx"
    source.write_bytes(_cnn())
    quantize_static(
        str(source),
        str(target),
        Reader(),
        quant_format=QuantFormat.QDQ,
        per_channel=per_channel,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
    )
    return target.read_bytes()


def _run(model: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return [np.asarray(out) for out in session.run(None, feeds)]


def _assert_same_outputs(original: bytes, rewritten: bytes, feeds: dict[str, np.ndarray]) -> None:
    for before, after in zip(_run(original, feeds), _run(rewritten, feeds), strict=True):
        np.testing.assert_allclose(after, before, rtol=0, atol=1e-5)


def _constant_dequantize_types(model: onnx.ModelProto) -> list[int]:
    """onnx data types of the initializers DequantizeLinear nodes read as ``x``."""
    types = {t.name: t.data_type for t in model.graph.initializer}
    return [
        types[n.input[0]]
        for n in model.graph.node
        if n.op_type == "DequantizeLinear" and n.input[0] in types
    ]


def _image() -> dict[str, np.ndarray]:
    return {"image": np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype(np.float32)}


@pytest.mark.parametrize("per_channel", [False, True])
def test_int32_biases_of_ort_qdq_models_are_folded_and_outputs_stay(
    tmp_path: Path, per_channel: bool
) -> None:
    original = _quantized(tmp_path, per_channel)
    assert _constant_dequantize_types(onnx.load_from_string(original)).count(INT32) == 3

    rewritten, folded = fold_constant_dequantize(original)

    model = onnx.load_from_string(rewritten)
    onnx.checker.check_model(model, full_check=True)
    kinds = _constant_dequantize_types(model)
    assert INT32 not in kinds
    assert kinds.count(INT8) == 3  # TensorRT builds INT8 from the weights' DequantizeLinear
    assert len(folded) == 3
    floats = {t.name: t for t in model.graph.initializer}
    assert all(floats[name].data_type == TensorProto.FLOAT for name in folded)
    assert not any(t.data_type == INT32 for t in model.graph.initializer)  # nothing left unused
    _assert_same_outputs(original, rewritten, _image())


def test_per_channel_int8_weights_are_folded_when_asked(tmp_path: Path) -> None:
    original = _quantized(tmp_path, per_channel=True)
    axes = [
        a.i
        for n in onnx.load_from_string(original).graph.node
        for a in n.attribute
        if n.op_type == "DequantizeLinear" and a.name == "axis"
    ]
    assert axes  # the quantizer wrote per-channel scales

    rewritten, folded = fold_constant_dequantize(original, fold_types={INT8, INT32})

    model = onnx.load_from_string(rewritten)
    onnx.checker.check_model(model, full_check=True)
    assert _constant_dequantize_types(model) == []
    assert len(folded) == 6
    _assert_same_outputs(original, rewritten, _image())


def test_folding_reads_int32_data_per_axis_scales_and_zero_points() -> None:
    x = np.array([[1, -2, 3], [4, 5, -6]], dtype=np.int32)
    scale = np.array([0.5, 0.25], dtype=np.float32)
    zero = np.array([1, -1], dtype=np.int32)
    inits = [
        helper.make_tensor("x", INT32, [2, 3], x.ravel().tolist()),  # int32_data, not raw_data
        numpy_helper.from_array(scale, "s"),
        numpy_helper.from_array(zero, "z"),
    ]
    original = _model(
        [
            helper.make_node("DequantizeLinear", ["x", "s", "z"], ["w"], axis=0),
            helper.make_node("Add", ["in", "w"], ["out"]),
        ],
        [helper.make_tensor_value_info("in", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])],
        inits,
    )

    rewritten, folded = fold_constant_dequantize(original)

    model = onnx.load_from_string(rewritten)
    assert folded == ["w"]
    assert [n.op_type for n in model.graph.node] == ["Add"]
    assert [t.name for t in model.graph.initializer] == ["w"]
    expected = (x - zero[:, None]).astype(np.float32) * scale[:, None]
    np.testing.assert_array_equal(numpy_helper.to_array(model.graph.initializer[0]), expected)
    _assert_same_outputs(original, rewritten, {"in": np.ones((2, 3), np.float32)})


def test_an_initializer_other_nodes_read_is_kept() -> None:
    inits = [
        numpy_helper.from_array(np.array([3, -4], np.int32), "x"),
        numpy_helper.from_array(np.array(0.5, np.float32), "s"),
    ]
    original = _model(
        [
            helper.make_node("DequantizeLinear", ["x", "s"], ["w"]),
            helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["w", "xf"], ["out"]),
        ],
        [],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])],
        inits,
    )

    rewritten, folded = fold_constant_dequantize(original)

    model = onnx.load_from_string(rewritten)
    onnx.checker.check_model(model, full_check=True)
    assert folded == ["w"]
    assert [t.name for t in model.graph.initializer] == ["x", "w"]
    _assert_same_outputs(original, rewritten, {})


def test_dequantize_of_a_graph_input_or_a_computed_tensor_stays() -> None:
    scale = numpy_helper.from_array(np.array(0.5, np.float32), "s")
    original = _model(
        [
            helper.make_node("Identity", ["q"], ["q2"]),
            helper.make_node("DequantizeLinear", ["q2", "s"], ["out"]),
        ],
        [helper.make_tensor_value_info("q", INT32, [3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [3])],
        [scale],
    )
    assert fold_constant_dequantize(original) == (original, [])


def _dims(model: bytes, section: str = "input") -> dict[str, list[str | int]]:
    graph = onnx.load_from_string(model).graph
    return {
        v.name: [d.dim_param if d.HasField("dim_param") else d.dim_value for d in dims]
        for v in getattr(graph, section)
        for dims in [v.type.tensor_type.shape.dim]
    }


def _paddle_like() -> bytes:
    weight = numpy_helper.from_array(np.full((2, 3, 1, 1), 0.5, np.float32), "w")
    return _model(
        [helper.make_node("Conv", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["?", 3, "?", "?"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["?", 2, "", " "])],
        [weight],
    )


def test_anonymous_dimension_names_get_names_of_their_own() -> None:
    original = _paddle_like()

    rewritten, lines = rename_dim_params(original, {"x": (1, 3, 48, 192)})

    onnx.checker.check_model(onnx.load_from_string(rewritten), full_check=True)
    assert _dims(rewritten) == {"x": ["x__dim0", 3, "x__dim2", "x__dim3"]}
    assert _dims(rewritten, "output") == {"y": ["y__dim0", 2, "y__dim2", "y__dim3"]}
    assert lines[0] == "input 'x' axis 0: '?' → 'x__dim0'"
    assert len(lines) == 6
    feeds = {"x": np.random.default_rng(3).standard_normal((1, 3, 48, 192)).astype(np.float32)}
    _assert_same_outputs(original, rewritten, feeds)


def _two_batches(b_shape: Sequence[str | int] = ("batch", 4)) -> bytes:
    return _model(
        [helper.make_node("Concat", ["a", "b"], ["y"], axis=0)],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, list(b_shape)),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["total", 4])],
    )


def test_a_shared_name_the_profile_keeps_equal_stays() -> None:
    original = _two_batches()
    assert rename_dim_params(original, {"a": (2, 4), "b": (2, 4)}) == (original, [])
    rewritten, lines = prepare_for_tensorrt(original, {"a": (2, 4), "b": (2, 4)})
    assert rewritten is original
    assert lines == []


def test_a_shared_name_the_profile_gives_different_sizes_is_renamed() -> None:
    original = _two_batches()

    rewritten, lines = rename_dim_params(original, {"a": (2, 4), "b": (3, 4)})

    assert _dims(rewritten) == {"a": ["a__dim0", 4], "b": ["b__dim0", 4]}
    assert _dims(rewritten, "output") == {"y": ["total", 4]}
    assert lines == [
        "input 'a' axis 0: 'batch' → 'a__dim0' (the profile gives sizes [2, 3])",
        "input 'b' axis 0: 'batch' → 'b__dim0' (the profile gives sizes [2, 3])",
    ]
    feeds = {"a": np.ones((2, 4), np.float32), "b": np.zeros((3, 4), np.float32)}
    _assert_same_outputs(original, rewritten, feeds)


def test_a_shared_name_is_renamed_when_min_or_max_sizes_differ() -> None:
    original = _two_batches()
    opt = {"a": (2, 4), "b": (2, 4)}
    rewritten, lines = rename_dim_params(original, opt, {"a": (1, 4), "b": (2, 4)})
    assert len(lines) == 2
    assert _dims(rewritten)["a"] == ["a__dim0", 4]


def test_new_names_do_not_collide_with_existing_ones() -> None:
    original = _two_batches(b_shape=("?", "a__dim1"))
    renamed, _ = rename_dim_params(original, {})
    assert _dims(renamed)["b"] == ["b__dim0", "a__dim1"]
    original = _model(
        [helper.make_node("Concat", ["a", "b"], ["y"], axis=0)],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["?", 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["a__dim0", 4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["total", 4])],
    )
    renamed, lines = rename_dim_params(original, {})
    assert _dims(renamed) == {"a": ["a__dim0_2", 4], "b": ["a__dim0", 4]}
    assert lines == ["input 'a' axis 0: '?' → 'a__dim0_2'"]


def test_an_unchanged_model_comes_back_as_the_same_bytes() -> None:
    original = _cnn()
    assert fold_constant_dequantize(original) == (original, [])
    assert rename_dim_params(original, {"image": (1, 3, 16, 16)}) == (original, [])
    rewritten, lines = prepare_for_tensorrt(original, {"image": (1, 3, 16, 16)})
    assert rewritten is original
    assert lines == []


@pytest.mark.parametrize("data", [b"not onnx", b"\x3a\xff\xff\xff\xff\x0f", b"\x08\x07", b""])
def test_bytes_that_are_not_a_model_are_a_clear_error(data: bytes) -> None:
    with pytest.raises(WireError, match="ONNX model"):
        prepare_for_tensorrt(data, {})
    with pytest.raises(WireError, match="ONNX model"):
        rename_dim_params(data, {})


def test_a_truncated_model_is_a_clear_error(tmp_path: Path) -> None:
    original = _quantized(tmp_path, per_channel=False)
    with pytest.raises(WireError, match="cannot fold DequantizeLinear in this ONNX model"):
        fold_constant_dequantize(original[:-7])


def _request(tmp_path: Path, model: bytes, profiles: Sequence[ShapeProfile] = ()) -> BuildRequest:
    source = tmp_path / "model.onnx"
    source.write_bytes(model)
    return BuildRequest(
        onnx_path=source,
        output_path=tmp_path / "out" / "plan.engine",
        config=DelegateConfig(shapes=tuple(profiles)),
    )


def test_prepared_onnx_writes_the_rewritten_model_beside_the_output(tmp_path: Path) -> None:
    shape = (1, 3, 48, 192)
    profile = ShapeProfile(input="x", min=shape, opt=shape, max=shape)
    request = _request(tmp_path, _paddle_like(), [profile])
    request.output_path.parent.mkdir()
    progress: list[tuple[float, str]] = []

    path = prepared_onnx(request, lambda p, m: progress.append((p, m)))

    assert path == tmp_path / "out" / "plan.engine.prepared.onnx"
    assert path.read_bytes() == prepare_for_tensorrt(_paddle_like(), {"x": shape})[0]
    assert progress[0][0] == 0.0
    assert progress[0][1].startswith("prepared for TensorRT: input 'x' axis 0: '?' → 'x__dim0'")
    assert progress[0][1].endswith("(and 3 more)")


def test_prepared_onnx_builds_an_unchanged_or_unreadable_model_as_it_is(tmp_path: Path) -> None:
    for data in (_cnn(), b"not onnx"):
        request = _request(tmp_path, data)
        request.output_path.parent.mkdir(exist_ok=True)
        assert prepared_onnx(request) == request.onnx_path
        assert list(request.output_path.parent.iterdir()) == []


def test_run_build_hands_the_tensorrt_builder_the_prepared_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The TensorRT branch of run_build with this module as a stand-in build child."""
    monkeypatch.setattr(build_runner, "HOST_BUILDER", __name__)
    monkeypatch.setattr(
        build_runner,
        "tensorrt_launch",
        lambda for_build=False: Launch(sys.executable, "tensorrt", str(REPO)),
    )
    original = _quantized(tmp_path, per_channel=False)
    request = _request(tmp_path, original)
    progress: list[tuple[float, str]] = []

    outcome = build_runner.run_build(
        __name__, request, 60, on_progress=lambda p, m: progress.append((p, m))
    )

    seen = json.loads(outcome.output.read_text())
    assert seen["source"] == str(request.output_path) + ".prepared.onnx"
    assert bytes.fromhex(seen["model"]) == fold_constant_dequantize(original)[0]
    assert progress[0][1].startswith("prepared for TensorRT: DequantizeLinear of a constant")
    assert sorted(p.name for p in request.output_path.parent.iterdir()) == ["plan.engine"]


def _stand_in_build_child(request_file: str) -> None:
    """What this module does as ``python -m``: write down the model it was asked to build."""
    request = json.loads(Path(request_file).read_text())
    source = Path(request["source"])
    seen = {"source": str(source), "model": source.read_bytes().hex()}
    Path(request["target"]).write_text(json.dumps(seen))


if __name__ == "__main__":
    _stand_in_build_child(sys.argv[1])
