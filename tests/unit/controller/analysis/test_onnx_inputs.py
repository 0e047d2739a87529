"""The controller's inputs are ONNX Runtime's inputs, for every IR version.

Initializers listed in ``graph.input`` (every IR-3 model's, overridable ones in later IRs) are
not inputs: no client sends them, no reference holds them.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from controller.analysis.onnx_inspect import inspect_model
from controller.analysis.reference_outputs import check_npz, reference_npz
from tests.model_corpus import CorpusModel, caffe2_ir3, corpus

_KSERVE = {
    "tensor(float)": "FP32",
    "tensor(float16)": "FP16",
    "tensor(int64)": "INT64",
    "tensor(bool)": "BOOL",
}


def _ort(model: CorpusModel) -> ort.InferenceSession:
    return ort.InferenceSession(model.data, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("model", corpus(), ids=lambda m: m.name)
def test_recorded_inputs_and_outputs_are_onnx_runtimes(tmp_path: Path, model: CorpusModel) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(model.data)
    signature = inspect_model(path)
    session = _ort(model)
    for recorded, listed in (
        (signature.inputs, session.get_inputs()),
        (signature.outputs, session.get_outputs()),
    ):
        assert [(t.name, t.datatype) for t in recorded] == [
            (a.name, _KSERVE[a.type]) for a in listed
        ]
        assert [t.shape for t in recorded] == [
            tuple("?" if d is None else d for d in a.shape) for a in listed
        ]


@pytest.mark.parametrize("model", corpus(), ids=lambda m: m.name)
def test_references_hold_exactly_onnx_runtimes_inputs_and_outputs(model: CorpusModel) -> None:
    npz = reference_npz(model.data, cases=2)
    session = _ort(model)
    with np.load(io.BytesIO(npz)) as arrays:
        keys = set(arrays.files)
        inputs = {k.removeprefix("input:"): arrays[k] for k in keys if k.startswith("input:")}
        want = session.run(None, {name: value[0] for name, value in inputs.items()})
        for arg, value in zip(session.get_outputs(), want, strict=True):
            np.testing.assert_allclose(arrays[f"output:{arg.name}"][0], value, rtol=1e-5, atol=1e-6)
    assert keys == {f"input:{a.name}" for a in session.get_inputs()} | {
        f"output:{a.name}" for a in session.get_outputs()
    }
    check_npz(model.data, npz)


def test_an_ir3_models_only_input_is_its_data() -> None:
    model = onnx.load_from_string(caffe2_ir3().data)
    assert model.ir_version == 3
    assert len(model.graph.input) > 10  # every initializer is listed as a graph input
    assert [a.name for a in _ort(caffe2_ir3()).get_inputs()] == ["gpu_0/data_0"]


def test_a_sparse_initializer_listed_as_a_graph_input_is_not_an_input(tmp_path: Path) -> None:
    values = onnx.numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "bias")
    indices = onnx.numpy_helper.from_array(np.array([0, 3], np.int64), "bias_indices")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Add", ["x", "bias"], ["y"])],
        "sparse",
        [
            onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4]),
            onnx.helper.make_tensor_value_info("bias", onnx.TensorProto.FLOAT, [4]),
        ],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])],
        sparse_initializer=[onnx.helper.make_sparse_tensor(values, indices, [4])],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    path = tmp_path / "sparse.onnx"
    path.write_bytes(model.SerializeToString())
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert [a.name for a in session.get_inputs()] == ["x"]
    assert [t.name for t in inspect_model(path).inputs] == ["x"]
