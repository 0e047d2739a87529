"""Triton's system shared-memory extension on the agent: real uvicorn, real /dev/shm, real ORT.

The client side is what ``tritonclient.utils.shared_memory`` does: create a POSIX shared-memory
object, write the tensor into it, register it with the server, and name it in the request.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from multiprocessing import shared_memory
from pathlib import Path

import httpx
import numpy as np
import onnxruntime as ort
import pytest

from agent.runtimes.ort import load_ort
from agent.serving.app import create_app
from agent.serving.core import ModelRegistry, ServedModel
from agent.serving.http_server import ServingServer
from agent.serving.shared_memory import SharedMemoryRegions
from agent.settings import AgentSettings
from agent.telemetry.metrics import Metrics
from controller.demo.sample_models import classifier
from tests.ports import free_port

IMAGE_BYTES = 1 * 3 * 32 * 32 * 4
OUT_BYTES = 10 * 4
SHM = "/v2/systemsharedmemory"


class Agent:
    """The serving stack over the sample classifier, with or without the extension."""

    def __init__(self, tmp_path: Path, *, enabled: bool) -> None:
        self.data = classifier()
        path = tmp_path / "classifier.onnx"
        path.write_bytes(self.data)
        self.registry = ModelRegistry()
        self.registry.swap(ServedModel("classifier", "1", "0" * 64, load_ort(path)))
        self.regions = SharedMemoryRegions() if enabled else None
        app = create_app(self.registry, Metrics(), lambda: True, "test", shared_memory=self.regions)
        self.server = ServingServer(app, "127.0.0.1", free_port())
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.server.start()}", timeout=10)

    def close(self) -> None:
        self.http.close()
        self.server.stop()
        if self.regions is not None:
            self.regions.close()
        self.registry.close_all()


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    a = Agent(tmp_path, enabled=True)
    yield a
    a.close()


@pytest.fixture
def segment() -> Iterator[shared_memory.SharedMemory]:
    """A client's shared-memory object: room for one image and, after it, one output."""
    shm = shared_memory.SharedMemory(
        name=f"jf-test-{uuid.uuid4().hex[:8]}", create=True, size=IMAGE_BYTES + OUT_BYTES
    )
    yield shm
    shm.close()
    shm.unlink()


def image() -> np.ndarray:
    return np.random.default_rng(11).standard_normal((1, 3, 32, 32)).astype(np.float32)


def expected(agent: Agent, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(agent.data, providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"image": x})[0])


def shm_input(region: str, size: int = IMAGE_BYTES, offset: int = 0) -> dict[str, object]:
    params: dict[str, object] = {
        "shared_memory_region": region,
        "shared_memory_byte_size": size,
    }
    if offset:
        params["shared_memory_offset"] = offset
    return {"name": "image", "shape": [1, 3, 32, 32], "datatype": "FP32", "parameters": params}


def register(agent: Agent, name: str, key: str, size: int, offset: int = 0) -> httpx.Response:
    return agent.http.post(
        f"{SHM}/region/{name}/register", json={"key": key, "offset": offset, "byte_size": size}
    )


def test_input_and_output_through_shared_memory_match_onnxruntime(
    agent: Agent, segment: shared_memory.SharedMemory
) -> None:
    x = image()
    segment.buf[:IMAGE_BYTES] = x.tobytes()
    assert register(agent, "in", f"/{segment.name}", IMAGE_BYTES).status_code == 200
    reply = register(agent, "out", f"/{segment.name}", OUT_BYTES, offset=IMAGE_BYTES)
    assert reply.status_code == 200, reply.text

    response = agent.http.post(
        "/v2/models/classifier/infer",
        json={
            "inputs": [shm_input("in")],
            "outputs": [
                {
                    "name": "probabilities",
                    "parameters": {
                        "shared_memory_region": "out",
                        "shared_memory_byte_size": OUT_BYTES,
                    },
                }
            ],
        },
    )

    assert response.status_code == 200, response.text
    (out,) = response.json()["outputs"]
    assert "data" not in out
    assert out["parameters"]["shared_memory_region"] == "out"
    assert out["parameters"]["shared_memory_byte_size"] == OUT_BYTES
    written = np.frombuffer(bytes(segment.buf[IMAGE_BYTES:]), dtype="<f4").reshape(1, 10)
    np.testing.assert_allclose(written, expected(agent, x), rtol=1e-6)


def test_input_in_shared_memory_with_json_output_and_a_new_frame_each_time(
    agent: Agent, segment: shared_memory.SharedMemory
) -> None:
    assert register(agent, "frames", segment.name, IMAGE_BYTES).status_code == 200
    for seed in (1, 2):
        x = np.random.default_rng(seed).standard_normal((1, 3, 32, 32)).astype(np.float32)
        segment.buf[:IMAGE_BYTES] = x.tobytes()  # the camera writes the next frame in place
        response = agent.http.post(
            "/v2/models/classifier/infer", json={"inputs": [shm_input("frames")]}
        )
        assert response.status_code == 200, response.text
        got = np.array(response.json()["outputs"][0]["data"], dtype=np.float32).reshape(1, 10)
        np.testing.assert_allclose(got, expected(agent, x), rtol=1e-6)


def test_status_and_unregister(agent: Agent, segment: shared_memory.SharedMemory) -> None:
    assert register(agent, "a", f"/{segment.name}", 16).status_code == 200
    assert register(agent, "b", f"/{segment.name}", 16, offset=16).status_code == 200
    status = agent.http.get(f"{SHM}/status").json()
    assert sorted((r["name"], r["offset"], r["byte_size"]) for r in status) == [
        ("a", 0, 16),
        ("b", 16, 16),
    ]
    assert agent.http.get(f"{SHM}/region/a/status").json() == [
        {"name": "a", "key": f"/{segment.name}", "offset": 0, "byte_size": 16}
    ]
    assert agent.http.post(f"{SHM}/region/a/unregister").status_code == 200
    assert [r["name"] for r in agent.http.get(f"{SHM}/status").json()] == ["b"]
    assert agent.http.post(f"{SHM}/unregister").status_code == 200
    assert agent.http.get(f"{SHM}/status").json() == []
    missing = agent.http.get(f"{SHM}/region/a/status")
    assert missing.status_code == 400
    assert "no shared-memory region 'a'" in missing.json()["error"]


@pytest.mark.parametrize(
    ("key", "size", "offset", "says"),
    [
        ("/jf-no-such-object", 16, 0, "no shared-memory object"),
        ("../../etc/passwd", 16, 0, "name a shared-memory object"),
        ("/a/b", 16, 0, "name a shared-memory object"),
        (None, IMAGE_BYTES + OUT_BYTES + 1, 0, "past the end"),
        (None, 16, IMAGE_BYTES + OUT_BYTES, "past the end"),
        (None, 0, 0, "byte_size must be at least 1"),
    ],
)
def test_a_region_that_cannot_be_registered_is_refused_with_the_reason(
    agent: Agent,
    segment: shared_memory.SharedMemory,
    key: str | None,
    size: int,
    offset: int,
    says: str,
) -> None:
    response = register(agent, "r", key or f"/{segment.name}", size, offset)
    assert response.status_code == 400
    assert says in response.json()["error"]
    assert agent.http.get(f"{SHM}/status").json() == []


def test_a_name_is_registered_once(agent: Agent, segment: shared_memory.SharedMemory) -> None:
    assert register(agent, "r", segment.name, 16).status_code == 200
    again = register(agent, "r", segment.name, 16)
    assert again.status_code == 400
    assert "already registered" in again.json()["error"]


def test_bad_references_in_infer_requests_are_400s_naming_the_problem(
    agent: Agent, segment: shared_memory.SharedMemory
) -> None:
    assert register(agent, "in", segment.name, IMAGE_BYTES).status_code == 200
    assert register(agent, "small", segment.name, 8, offset=IMAGE_BYTES).status_code == 200
    cases = [
        ({"inputs": [shm_input("nope")]}, "no shared-memory region 'nope'"),
        ({"inputs": [shm_input("in", size=IMAGE_BYTES - 4)]}, "binary bytes given"),
        ({"inputs": [shm_input("in", size=16, offset=IMAGE_BYTES)]}, "past the end of region"),
        (
            {"inputs": [{**shm_input("in"), "data": [0.0]}]},
            "shared memory and data",
        ),
        (
            {
                "inputs": [
                    {
                        "name": "image",
                        "shape": [1, 3, 32, 32],
                        "datatype": "FP32",
                        "parameters": {"shared_memory_region": "in"},
                    }
                ]
            },
            "must be given together",
        ),
        (
            {
                "inputs": [shm_input("in")],
                "outputs": [
                    {
                        "name": "probabilities",
                        "parameters": {
                            "shared_memory_region": "small",
                            "shared_memory_byte_size": 8,
                        },
                    }
                ],
            },
            "the output needs 40 bytes",
        ),
    ]
    for body, says in cases:
        response = agent.http.post("/v2/models/classifier/infer", json=body)
        assert response.status_code == 400, (body, response.text)
        assert says in response.json()["error"], (says, response.text)


def test_off_by_default_and_says_how_to_turn_it_on(
    tmp_path: Path, segment: shared_memory.SharedMemory
) -> None:
    agent = Agent(tmp_path, enabled=False)
    try:
        assert "system_shared_memory" not in agent.http.get("/v2").json()["extensions"]
        refused = register(agent, "r", segment.name, 16)
        assert refused.status_code == 400
        assert "JETFLEET_SERVE_SHARED_MEMORY=true" in refused.json()["error"]
        infer = agent.http.post("/v2/models/classifier/infer", json={"inputs": [shm_input("r")]})
        assert infer.status_code == 400
        assert "JETFLEET_SERVE_SHARED_MEMORY=true" in infer.json()["error"]
    finally:
        agent.close()


def test_on_it_is_announced_in_server_metadata(agent: Agent) -> None:
    assert "system_shared_memory" in agent.http.get("/v2").json()["extensions"]


def test_the_setting_reads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert AgentSettings(device_id="gw-1").serve_shared_memory is False
    monkeypatch.setenv("JETFLEET_SERVE_SHARED_MEMORY", "true")
    assert AgentSettings(device_id="gw-1").serve_shared_memory is True
