"""The model corpus end to end: every model pushed to a real controller,
deployed to a real agent (its ONNX Runtime engine built), served, and answered over KServe v2
(JSON ``data`` and binary tensors) equal to ONNX Runtime run directly on the original model. The
model's metadata names exactly ONNX Runtime's inputs and outputs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import onnxruntime as ort
import pytest

from tests.integration.controller.conftest import poll
from tests.integration.jobs.conftest import DEVICE, Fleet, running_fleet
from tests.model_corpus import CorpusModel, corpus

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow, pytest.mark.xdist_group("model_corpus")]

MODELS = corpus()
_NUMPY = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(bool)": np.bool_,
}
_KSERVE = {np.float32: "FP32", np.float16: "FP16", np.int64: "INT64", np.bool_: "BOOL"}


def _slot(model: CorpusModel) -> str:
    return model.name.replace("-", "_")


@pytest.fixture(scope="module")
def corpus_fleet(
    mosquitto: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Fleet, dict[str, dict[str, Any]]]]:
    """One controller and one agent with every corpus model deployed; each slot as reported
    once it served or failed."""
    with running_fleet(mosquitto, tmp_path_factory.mktemp("corpus"), "corpus", 60) as made:
        settled = {}
        for model in MODELS:
            made.push(_slot(model), "1", model.push or model.data)
            settled[_slot(model)] = _deploy_and_wait(made, _slot(model))
        yield made, settled


def _deploy_and_wait(fleet: Fleet, name: str) -> dict[str, Any]:
    """Deploy ``name`` version 1 to the agent; its slot once serving or failed."""
    body = {"model": name, "version": "1", "device": DEVICE}
    response = fleet.api.post("/api/v1/deployments", json=body)
    assert response.status_code == 200, response.text

    def settled() -> dict[str, Any] | None:
        for slot in fleet.device()["reported"]:
            if slot["name"] == name and slot["phase"] in ("serving", "failed"):
                return dict(slot)
        return None

    return poll(settled, 120, f"{name} serving or failed on {DEVICE}")


def _feeds(session: ort.InferenceSession, seed: int) -> dict[str, np.ndarray]:
    """Random inputs of every ONNX Runtime input; dynamic dimensions 2 (batch) or 8 (others)."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for arg in session.get_inputs():
        shape = tuple(
            d if isinstance(d, int) and d > 0 else (2 if i == 0 else 8)
            for i, d in enumerate(arg.shape)
        )
        dtype = _NUMPY[arg.type]
        if np.dtype(dtype).kind == "f":
            feeds[arg.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[arg.name] = rng.integers(0, 2 if dtype is np.bool_ else 9, shape).astype(dtype)
    return feeds


def _json_body(feeds: dict[str, np.ndarray]) -> dict[str, Any]:
    return {
        "inputs": [
            {
                "name": name,
                "datatype": _KSERVE[value.dtype.type],
                "shape": list(value.shape),
                "data": value.ravel().tolist(),
            }
            for name, value in feeds.items()
        ]
    }


def _binary_request(feeds: dict[str, np.ndarray]) -> tuple[bytes, dict[str, str]]:
    header: dict[str, Any] = {
        "inputs": [
            {
                "name": name,
                "datatype": _KSERVE[value.dtype.type],
                "shape": list(value.shape),
                "parameters": {"binary_data_size": value.nbytes},
            }
            for name, value in feeds.items()
        ],
        "parameters": {"binary_data_output": True},
    }
    head = json.dumps(header).encode()
    body = head + b"".join(np.ascontiguousarray(v).tobytes() for v in feeds.values())
    return body, {"Inference-Header-Content-Length": str(len(head))}


def _outputs(response: httpx.Response, session: ort.InferenceSession) -> dict[str, np.ndarray]:
    assert response.status_code == 200, response.text
    types = {a.name: _NUMPY[a.type] for a in session.get_outputs()}
    length = response.headers.get("Inference-Header-Content-Length")
    raw = response.content
    head = json.loads(raw[: int(length)] if length else raw)
    tail = memoryview(raw)[int(length) :] if length else memoryview(b"")
    got, offset = {}, 0
    for out in head["outputs"]:
        dtype, shape = types[out["name"]], out["shape"]
        size = (out.get("parameters") or {}).get("binary_data_size")
        if size is None:
            got[out["name"]] = np.asarray(out["data"], dtype).reshape(shape)
        else:
            got[out["name"]] = np.frombuffer(tail[offset : offset + size], dtype).reshape(shape)
            offset += size
    return got


def _assert_equal(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    for name, expected in want.items():
        assert got[name].dtype == expected.dtype, name
        np.testing.assert_allclose(
            got[name].astype(np.float64), expected.astype(np.float64), rtol=1e-3, atol=1e-3
        )


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_each_model_serves_what_onnx_runtime_computes(
    corpus_fleet: tuple[Fleet, dict[str, dict[str, Any]]], model: CorpusModel
) -> None:
    fleet, settled = corpus_fleet
    slot = settled[_slot(model)]
    assert slot["phase"] == "serving", slot.get("last_error")
    assert fleet.agent is not None
    session = ort.InferenceSession(model.data, providers=["CPUExecutionProvider"])
    url = f"{fleet.agent.daemon.serve_url}/v2/models/{_slot(model)}"
    with httpx.Client(timeout=30) as http:
        metadata = http.get(url).json()
        assert [i["name"] for i in metadata["inputs"]] == [a.name for a in session.get_inputs()]
        assert [o["name"] for o in metadata["outputs"]] == [a.name for a in session.get_outputs()]
        recorded = fleet.api.get(f"/api/v1/models/{_slot(model)}/versions/1").json()
        assert [i["name"] for i in recorded["inputs"]] == [a.name for a in session.get_inputs()]
        for seed in (1, 2):
            feeds = _feeds(session, seed)
            names = [a.name for a in session.get_outputs()]
            want = dict(zip(names, session.run(None, feeds), strict=True))
            _assert_equal(
                _outputs(http.post(f"{url}/infer", json=_json_body(feeds)), session), want
            )
            body, headers = _binary_request(feeds)
            answer = http.post(f"{url}/infer", content=body, headers=headers)
            _assert_equal(_outputs(answer, session), want)
