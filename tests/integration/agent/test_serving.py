"""KServe v2 over a real uvicorn: metadata, inference equal to ONNX Runtime, errors, counting."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import onnxruntime as ort
import pytest

from agent.errors import StartupError
from agent.runtimes.ort import load_ort
from agent.serving.app import create_app
from agent.serving.core import ModelRegistry, ServedModel
from agent.serving.http_server import ServingServer
from agent.telemetry.metrics import Metrics
from controller.demo.sample_models import anomaly, classifier
from tests.ports import free_port


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.registry = ModelRegistry()
        self.metrics = Metrics()
        self.ready = False
        app = create_app(self.registry, self.metrics, lambda: self.ready, "test")
        self.server = ServingServer(app, "127.0.0.1", free_port())
        self.url = f"http://127.0.0.1:{self.server.start()}"
        self.http = httpx.Client(base_url=self.url, timeout=10)

    def serve(self, name: str, version: str, data: bytes) -> ServedModel:
        path = self.tmp_path / f"{name}-{version}.onnx"
        path.write_bytes(data)
        entry = ServedModel(name, version, "0" * 64, load_ort(path))
        old = self.registry.swap(entry)
        if old is not None:
            old.drain_and_close()
        return entry

    def close(self) -> None:
        self.http.close()
        self.server.stop()
        self.registry.close_all()


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    try:
        yield h
    finally:
        h.close()


def image_body(image: np.ndarray) -> dict[str, object]:
    return {
        "inputs": [
            {
                "name": "image",
                "shape": list(image.shape),
                "datatype": "FP32",
                "data": image.tolist(),
            }
        ]
    }


def test_health_and_readiness(harness: Harness) -> None:
    assert harness.http.get("/v2/health/live").json() == {"live": True}
    assert harness.http.get("/v2/health/ready").status_code == 503
    harness.ready = True
    assert harness.http.get("/v2/health/ready").status_code == 200


def test_metadata_describes_inputs_and_outputs(harness: Harness) -> None:
    harness.serve("classifier", "1.0", classifier())
    meta = harness.http.get("/v2/models/classifier").json()
    assert meta == {
        "name": "classifier",
        "versions": ["1.0"],
        "platform": "onnxruntime_onnx",
        "inputs": [{"name": "image", "datatype": "FP32", "shape": [1, 3, 32, 32]}],
        "outputs": [{"name": "probabilities", "datatype": "FP32", "shape": [1, 10]}],
    }
    assert harness.http.get("/v2/models/classifier/ready").json() == {
        "name": "classifier",
        "ready": True,
    }


def test_inference_matches_onnxruntime_run_directly(harness: Harness) -> None:
    data = classifier()
    harness.serve("classifier", "1.0", data)
    image = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    response = harness.http.post("/v2/models/classifier/infer", json=image_body(image))
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["model_name"], body["model_version"]) == ("classifier", "1.0")
    (out,) = body["outputs"]
    assert (out["name"], out["shape"], out["datatype"]) == ("probabilities", [1, 10], "FP32")
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"image": image})
    np.testing.assert_allclose(np.array(out["data"]).reshape(1, 10), expected, rtol=1e-6)


def test_flat_and_nested_json_tensors_give_the_same_answer(harness: Harness) -> None:
    """A flat ``data`` array is read by simdjson into numpy, a nested one by the general
    decoder (agent.serving.infer_body): the same inference either way, as ONNX Runtime's."""
    data = classifier()
    harness.serve("classifier", "1.0", data)
    image = np.random.default_rng(5).standard_normal((1, 3, 32, 32)).astype(np.float32)
    tensor = {"name": "image", "shape": [1, 3, 32, 32], "datatype": "FP32"}
    flat = {"inputs": [{**tensor, "data": image.ravel().tolist()}]}
    answers = [
        harness.http.post("/v2/models/classifier/infer", json=body).json()
        for body in (flat, image_body(image))
    ]
    assert answers[0] == answers[1]
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"image": image})
    got = np.array(answers[0]["outputs"][0]["data"], np.float32).reshape(1, 10)
    np.testing.assert_array_equal(got, expected)


def test_two_models_side_by_side(harness: Harness) -> None:
    harness.serve("classifier", "1.0", classifier())
    harness.serve("anomaly", "2", anomaly())
    body = {
        "inputs": [{"name": "features", "shape": [1, 16], "datatype": "FP32", "data": [0.1] * 16}]
    }
    response = harness.http.post("/v2/models/anomaly/infer", json=body)
    assert response.status_code == 200
    score = response.json()["outputs"][0]["data"][0]
    assert 0.0 < score < 1.0


def test_bad_input_is_400_with_error_and_counted(harness: Harness) -> None:
    harness.serve("classifier", "1.0", classifier())
    image = np.zeros((1, 3, 16, 16), dtype=np.float32)
    response = harness.http.post("/v2/models/classifier/infer", json=image_body(image))
    assert response.status_code == 400
    assert response.json() == {
        "error": "input 'image': shape [1, 3, 16, 16] given, expected [1, 3, 32, 32]"
    }
    not_json = harness.http.post("/v2/models/classifier/infer", content=b"{nope")
    assert not_json.status_code == 400
    assert "not JSON" in not_json.json()["error"]
    ok = harness.http.post(
        "/v2/models/classifier/infer", json=image_body(np.zeros((1, 3, 32, 32), np.float32))
    )
    assert ok.status_code == 200
    (stats,) = harness.metrics.sample()
    assert (stats.name, stats.version, stats.requests, stats.errors) == ("classifier", "1.0", 3, 2)
    assert stats.latency_p50_ms is not None
    assert stats.latency_p50_ms > 0


def test_unknown_model_is_404(harness: Harness) -> None:
    for response in (
        harness.http.get("/v2/models/nope"),
        harness.http.get("/v2/models/nope/ready"),
        harness.http.post("/v2/models/nope/infer", json={"inputs": []}),
    ):
        assert response.status_code == 404
        assert response.json() == {"error": "model 'nope' is not being served"}


def test_swap_serves_the_new_version(harness: Harness) -> None:
    harness.serve("classifier", "1.0", classifier(seed=1))
    harness.serve("classifier", "2.0", classifier(seed=2))
    body = image_body(np.ones((1, 3, 32, 32), np.float32))
    assert harness.http.post("/v2/models/classifier/infer", json=body).json()["model_version"] == (
        "2.0"
    )


def test_taken_port_is_a_startup_error_naming_the_setting(harness: Harness) -> None:
    port = int(harness.url.rsplit(":", 1)[1])
    other = ServingServer(
        create_app(ModelRegistry(), Metrics(), lambda: True, "t"), "127.0.0.1", port
    )
    with pytest.raises(StartupError, match="JETFLEET_SERVE_ADDRESS"):
        other.start()
