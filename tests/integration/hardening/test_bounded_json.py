"""JSON from the network is bounded, and what a request causes is the request's error.

Through real parts: Mosquitto and a serving controller for MQTT payloads, the agent's KServe
server over HTTP with ONNX Runtime models built in code.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from agent.serving.app import create_app
from agent.serving.core import ModelRegistry
from agent.serving.http_server import ServingServer
from agent.telemetry.metrics import Metrics
from controller.server import Controller
from shared.codec import MAX_JSON_DEPTH, encode
from shared.topics import Channel, Topics
from tests.integration.agent.test_serving import Harness
from tests.integration.controller.agent_messages import telemetry
from tests.integration.controller.conftest import MqttPeer
from tests.integration.hardening.conftest import open_controller
from tests.integration.tls.agent_runner import poll
from tests.ports import free_port

DEEP = 5_000


def nested(levels: int, inner: bytes = b"1") -> bytes:
    return b"[" * levels + inner + b"]" * levels


def strict_json(text: bytes) -> Any:
    """Parse as a strict parser does (JavaScript's JSON.parse): bare NaN/Infinity refused."""

    def refuse(token: str) -> None:
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


def model(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: list[Any]) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString()


def dynamic_conv() -> bytes:
    """A 3x3 Conv over ``x [N, 3, H, W]``: H and W below 3 are refused by ONNX Runtime."""
    weights = numpy_helper.from_array(np.ones((2, 3, 3, 3), np.float32), "w")
    return model(
        [helper.make_node("Conv", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [weights],
    )


def logarithm() -> bytes:
    """``y = log(x)`` over ``x [4]``: NaN and -Infinity for negative and zero inputs."""
    return model(
        [helper.make_node("Log", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [],
    )


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    try:
        yield h
    finally:
        h.close()


def test_a_deeply_nested_infer_body_is_a_counted_400(harness: Harness) -> None:
    harness.serve("log", "1", logarithm())
    url = "/v2/models/log/infer"
    whole = harness.http.post(url, content=nested(DEEP))
    head = b'{"inputs":[{"name":"x","shape":[4],"datatype":"FP32","data":'
    data = harness.http.post(url, content=head + nested(DEEP) + b"}]}")
    just_over = harness.http.post(url, content=head + nested(MAX_JSON_DEPTH) + b"}]}")
    for response in (whole, data, just_over):
        assert response.status_code == 400
        assert response.json() == {
            "error": f"request body: nests deeper than {MAX_JSON_DEPTH} levels"
        }
    (stats,) = harness.metrics.sample()
    assert (stats.requests, stats.errors) == (3, 3)


def test_a_body_over_the_limit_is_refused_with_413(tmp_path: Path) -> None:
    registry, metrics = ModelRegistry(), Metrics()
    app = create_app(registry, metrics, lambda: True, "test", max_body_bytes=1000)
    server = ServingServer(app, "127.0.0.1", free_port())
    h = Harness.__new__(Harness)
    h.tmp_path, h.registry, h.metrics, h.server = tmp_path, registry, metrics, server
    h.http = httpx.Client(base_url=f"http://127.0.0.1:{server.start()}", timeout=10)
    try:
        h.serve("log", "1", logarithm())
        body = {"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": [1.0] * 4}]}
        assert h.http.post("/v2/models/log/infer", json=body).status_code == 200
        padded = json.dumps(body).encode() + b" " * 1000
        response = h.http.post("/v2/models/log/infer", content=padded)
        assert response.status_code == 413
        assert response.json() == {"error": "request body is over the 1000-byte limit"}
        (stats,) = metrics.sample()
        assert (stats.requests, stats.errors) == (2, 1)
    finally:
        h.close()


def test_a_shape_the_runtime_refuses_is_a_400_with_its_message(harness: Harness) -> None:
    harness.serve("conv", "1", dynamic_conv())
    url = "/v2/models/conv/infer"
    for shape in ([1, 3, 0, 0], [1, 3, 2, 2]):
        count = int(np.prod(shape))
        body = {
            "inputs": [{"name": "x", "shape": shape, "datatype": "FP32", "data": [0.5] * count}]
        }
        response = harness.http.post(url, json=body)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error.startswith("the model refused the input: [ONNXRuntimeError]")
        assert "INVALID_ARGUMENT" in error
        assert "Invalid input shape" in error
    fits = {"inputs": [{"name": "x", "shape": [1, 3, 3, 3], "datatype": "FP32", "data": [1] * 27}]}
    response = harness.http.post(url, json=fits)
    assert response.status_code == 200
    assert strict_json(response.content)["outputs"][0]["data"] == [27.0, 27.0]


def test_non_finite_outputs_are_valid_json_that_clients_read_back(harness: Harness) -> None:
    data = logarithm()
    harness.serve("log", "1", data)
    x = np.array([-1.0, 0.0, 1.0, np.e], np.float32)
    body = {"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": x.tolist()}]}
    response = harness.http.post("/v2/models/log/infer", json=body)
    assert response.status_code == 200
    (out,) = strict_json(response.content)["outputs"]
    assert out["data"][:3] == ["NaN", "-Infinity", 0.0]
    # What tritonclient's JSON path does with it: np.array(data, dtype=...).
    (expected,) = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = np.array(out["data"], dtype=np.float32).reshape(out["shape"])
    np.testing.assert_array_equal(got, expected)


def test_nan_in_a_request_is_still_read(harness: Harness) -> None:
    """Python's json writes bare NaN; such clients keep working (and get valid JSON back)."""
    harness.serve("log", "1", logarithm())
    text = '{"inputs":[{"name":"x","shape":[4],"datatype":"FP32","data":[NaN,Infinity,1,1]}]}'
    response = harness.http.post("/v2/models/log/infer", content=text.encode())
    assert response.status_code == 200
    assert strict_json(response.content)["outputs"][0]["data"] == ["NaN", "Infinity", 0.0, 0.0]


@pytest.fixture
def topics() -> Topics:
    return Topics(f"nested-{uuid.uuid4().hex[:10]}/v1")


@pytest.fixture
def controller(mosquitto: str, topics: Topics, tmp_path: Path) -> Iterator[Controller]:
    with open_controller(mosquitto, tmp_path, topics.prefix) as c:
        yield c


def test_a_deeply_nested_mqtt_payload_is_rejected_counted_and_logged_in_one_line(
    controller: Controller, mosquitto: str, topics: Topics, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    peer = MqttPeer(mosquitto).connect()
    api = httpx.Client(base_url=controller.http_url, timeout=10)
    try:
        deep = b'{"device_id":"gw-deep","extra":' + nested(DEEP, b"{}") + b"}"
        peer.publish(topics.device("gw-deep", Channel.TELEMETRY), deep)
        stats = poll(
            lambda: (s := api.get("/api/v1/ingest").json())["rejected"] == 1 and s,
            "the nested payload rejected",
        )
        line = (
            f"rejected telemetry from gw-deep: <payload>: nests deeper than {MAX_JSON_DEPTH} levels"
        )
        assert stats["last_rejection"] == line
        # The ingest goes on: a good sample from the same device is stored.
        peer.publish(
            topics.device("gw-deep", Channel.TELEMETRY), encode(telemetry("gw-deep", "s-1"))
        )
        poll(lambda: api.get("/api/v1/ingest").json()["accepted"] >= 1, "the good sample")
    finally:
        peer.close()
        api.close()
    assert [r.getMessage() for r in caplog.records if "gw-deep" in r.getMessage()] == [line]
    assert [r for r in caplog.records if r.exc_info] == []
