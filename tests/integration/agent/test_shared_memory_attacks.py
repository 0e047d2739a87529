"""What a local user could do to the agent through the shared-memory extension,
each reproduced against the agent's serving stack in a process of its own (an attack that kills
it must not kill the test) with real /dev/shm objects and a real HTTP client.

N2: register the TensorRT host's own regions (``jfth-*``) and read or overwrite in-flight
tensors. N3: register a symbolic link to a file the agent can read (``identity.json``, a
root-only file). N4: truncate a registered object and infer: the agent died of SIGBUS. N5:
register regions until the agent has no descriptor left. Plus the owner rule: an object of a
user the agent was not told to share with is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from multiprocessing import shared_memory
from pathlib import Path

import httpx
import numpy as np
import pytest

from agent.serving.shared_memory import MAX_REGIONS
from agent.trt_host import shm
from controller.demo.sample_models import classifier

IMAGE_BYTES = 1 * 3 * 32 * 32 * 4
SHM = "/v2/systemsharedmemory"
SHARED_UID = 54321
"""A uid listed as shared with the agent (the test chowns an object to it: root only)."""


class ServingProcess:
    def __init__(self, model: Path, owners: list[int]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.agent.serving_process", str(model)]
            + [str(u) for u in owners],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        port = json.loads(self.proc.stdout.readline())["port"]
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def register(self, name: str, key: str, size: int = IMAGE_BYTES) -> httpx.Response:
        body = {"key": key, "offset": 0, "byte_size": size}
        return self.http.post(f"{SHM}/region/{name}/register", json=body)

    def infer(self, region: str) -> httpx.Response:
        params = {"shared_memory_region": region, "shared_memory_byte_size": IMAGE_BYTES}
        tensor = {"name": "image", "shape": [1, 3, 32, 32], "datatype": "FP32"}
        body = {"inputs": [{**tensor, "parameters": params}]}
        return self.http.post("/v2/models/classifier/infer", json=body)

    def close(self) -> None:
        self.http.close()
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[ServingProcess]:
    model = tmp_path / "classifier.onnx"
    model.write_bytes(classifier())
    serving = ServingProcess(model, [SHARED_UID])
    yield serving
    serving.close()


@pytest.fixture
def segment() -> Iterator[shared_memory.SharedMemory]:
    """A client's object holding one image."""
    made = shared_memory.SharedMemory(
        name=f"jf-attack-{uuid.uuid4().hex[:8]}", create=True, size=IMAGE_BYTES
    )
    np.ndarray((1, 3, 32, 32), np.float32, buffer=made.buf)[:] = 0.5
    yield made
    made.close()
    made.unlink()


def _object(name: str, data: bytes) -> Path:
    path = Path(shm.SHM_DIR) / name
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data)
    os.close(fd)
    return path


def test_the_tensorrt_hosts_regions_cannot_be_registered(agent: ServingProcess) -> None:
    host_region = _object(f"{shm.ROOT}{os.getpid()}-x.1-in-1-1", bytes(IMAGE_BYTES))
    try:
        refused = agent.register("steal", host_region.name)
        assert refused.status_code == 400, refused.text
        assert "TensorRT host regions" in refused.json()["error"]
        assert agent.http.get(f"{SHM}/status").json() == []
    finally:
        host_region.unlink()


def test_a_symbolic_link_is_refused_and_its_target_untouched(
    agent: ServingProcess, tmp_path: Path
) -> None:
    secret = tmp_path / "identity.json"
    secret.write_bytes(b'{"token": "' + b"s" * (IMAGE_BYTES - 14) + b'"}\n')
    before = secret.read_bytes()
    link = Path(shm.SHM_DIR) / f"jf-link-{uuid.uuid4().hex[:8]}"
    link.symlink_to(secret)
    try:
        refused = agent.register("link", link.name)
        assert refused.status_code == 400, refused.text
        assert "symbolic link" in refused.json()["error"]
        assert secret.read_bytes() == before
    finally:
        link.unlink()


def test_a_truncated_object_is_a_400_and_the_agent_serves_on(
    agent: ServingProcess, segment: shared_memory.SharedMemory
) -> None:
    assert agent.register("frames", segment.name).status_code == 200
    assert agent.infer("frames").status_code == 200
    os.truncate(Path(shm.SHM_DIR) / segment.name, 0)

    after = agent.infer("frames")

    assert agent.alive(), f"the agent died: exit status {agent.proc.returncode}"
    assert after.status_code == 400, after.text
    assert "truncated after registration" in after.json()["error"]
    os.truncate(Path(shm.SHM_DIR) / segment.name, IMAGE_BYTES)
    assert agent.infer("frames").status_code == 200


def test_regions_are_capped_and_descriptors_stay_bounded(
    agent: ServingProcess, segment: shared_memory.SharedMemory
) -> None:
    before = agent.descriptors()
    for number in range(MAX_REGIONS):
        assert agent.register(f"r{number}", segment.name, 16).status_code == 200
    over = agent.register("one-more", segment.name, 16)

    assert over.status_code == 400, over.text
    assert f"{MAX_REGIONS} regions are registered" in over.json()["error"]
    assert agent.descriptors() <= before + MAX_REGIONS + 8
    assert agent.http.post(f"{SHM}/unregister").status_code == 200
    assert agent.descriptors() <= before + 8
    assert agent.register("again", segment.name, 16).status_code == 200


def test_only_objects_of_the_agents_user_and_listed_users_are_registered(
    agent: ServingProcess,
) -> None:
    if os.geteuid() != 0:
        pytest.fail("this test gives objects to other users (chown): run it as root, as CI does")
    listed = _object(f"jf-listed-{uuid.uuid4().hex[:8]}", bytes(64))
    stranger = _object(f"jf-stranger-{uuid.uuid4().hex[:8]}", bytes(64))
    try:
        os.chown(listed, SHARED_UID, -1)
        os.chown(stranger, SHARED_UID + 1, -1)
        assert agent.register("listed", listed.name, 64).status_code == 200
        refused = agent.register("stranger", stranger.name, 64)
        assert refused.status_code == 400, refused.text
        assert f"belongs to uid {SHARED_UID + 1}" in refused.json()["error"]
        assert "JETFLEET_SERVE_SHARED_MEMORY_UIDS" in refused.json()["error"]
    finally:
        listed.unlink()
        stranger.unlink()


def test_the_agents_metrics_pass_promtool(
    agent: ServingProcess, segment: shared_memory.SharedMemory, promtool: Callable[[str], str]
) -> None:
    """What Prometheus scrapes from an agent serving a model passes its own lint."""
    assert agent.register("frames", segment.name).status_code == 200
    assert agent.infer("frames").status_code == 200
    text = agent.http.get("/metrics").text
    assert "jetfleet_request_latency_seconds_bucket" in text
    assert promtool(text) == ""
