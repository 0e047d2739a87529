"""The ONNX Runtime engine keeps the model's interface, whatever the IR version.

An IR-3 model lists its initializers in ``graph.input``; when ONNX Runtime folds some of them
away (Conv+BatchNormalization fusion), the optimised model it saves used to list them as inputs,
and every warm-up/validation then failed with "reference lacks input(s) ..._SHAPE".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from agent.engines.build_protocol import BuilderError, BuildRequest
from agent.engines.builder_ort import build, keep_interface
from agent.engines.onnx_interface import interface, keep_inputs
from agent.runtimes.base import KSERVE_TO_NUMPY
from agent.runtimes.ort import load_ort
from shared.delegate import DelegateConfig, OrtOptions
from tests.model_corpus import CorpusModel, caffe2_ir3, corpus

LEVELS = ("disable", "basic", "extended", "all")


def _build(tmp_path: Path, model: CorpusModel, level: str) -> Path:
    source = tmp_path / "model.onnx"
    source.write_bytes(model.data)
    config = DelegateConfig(onnxruntime=OrtOptions(graph_optimization_level=level))  # type: ignore[arg-type]
    request = BuildRequest(onnx_path=source, output_path=tmp_path / "engine", config=config)
    build(request, lambda _p, _m: None)
    return request.output_path


def _feeds(session: ort.InferenceSession) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    feeds = {}
    for arg in session.get_inputs():
        shape = tuple(d if isinstance(d, int) and d > 0 else 2 for d in arg.shape)
        feeds[arg.name] = rng.integers(0, 3, shape).astype(
            {"tensor(float)": np.float32, "tensor(float16)": np.float16}.get(arg.type, np.int64)
        )
        if arg.type == "tensor(bool)":
            feeds[arg.name] = feeds[arg.name].astype(bool)
    return feeds


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("model", corpus(), ids=lambda m: m.name)
def test_the_engine_takes_and_gives_what_onnx_runtime_lists_for_the_model(
    tmp_path: Path, model: CorpusModel, level: str
) -> None:
    original = ort.InferenceSession(model.data, providers=["CPUExecutionProvider"])
    engine = load_ort(_build(tmp_path, model, level))
    assert [s.name for s in engine.inputs] == [a.name for a in original.get_inputs()]
    assert [np.dtype(KSERVE_TO_NUMPY[s.datatype]) for s in engine.inputs] == [
        f.dtype for f in _feeds(original).values()
    ]
    assert [s.name for s in engine.outputs] == [a.name for a in original.get_outputs()]
    feeds = _feeds(original)
    got = engine.infer(feeds)
    for arg, expected in zip(original.get_outputs(), original.run(None, feeds), strict=True):
        assert got[arg.name].dtype == np.asarray(expected).dtype
        np.testing.assert_allclose(
            got[arg.name].astype(np.float64), np.asarray(expected, np.float64), rtol=1e-3, atol=1e-4
        )


def test_an_ir3_engine_asks_only_for_the_data_input(tmp_path: Path) -> None:
    engine = load_ort(_build(tmp_path, caffe2_ir3(), "all"))
    assert [s.name for s in engine.inputs] == ["gpu_0/data_0"]
    assert [s.name for s in engine.outputs] == ["gpu_0/softmax_1"]
    assert engine.inputs[0].shape == (1, 3, 16, 16)


def test_dropping_inputs_rewrites_only_the_graph_inputs() -> None:
    data = caffe2_ir3().data
    listed = [v.name for v in onnx.load_from_string(data).graph.input]
    keep = ["gpu_0/data_0"]
    fixed, dropped = keep_inputs(data, keep)
    assert dropped == []  # every entry is an initializer's: nothing to drop
    assert fixed is data
    model = onnx.load_from_string(data)
    model.graph.initializer.pop()  # an entry without its initializer: a stale input
    stale = model.graph.input[-1].name
    fixed, dropped = keep_inputs(model.SerializeToString(), keep)
    assert dropped == [stale]
    rebuilt = onnx.load_from_string(fixed)
    assert [v.name for v in rebuilt.graph.input] == [n for n in listed if n != stale]
    del model.graph.input[-1]
    assert rebuilt == model
    assert interface(fixed) == (["gpu_0/data_0"], ["gpu_0/softmax_1"])


def test_an_engine_whose_interface_differs_from_the_model_fails_the_build(tmp_path: Path) -> None:
    path = tmp_path / "engine"
    path.write_bytes(caffe2_ir3().data)
    with pytest.raises(BuilderError) as failed:
        keep_interface(path, ["gpu_0/data_0", "extra"], ["gpu_0/softmax_1"])
    assert "the optimised model takes ['gpu_0/data_0'], the model takes" in failed.value.lines[0]
    with pytest.raises(BuilderError, match="gives"):
        keep_interface(path, ["gpu_0/data_0"], ["other"])
