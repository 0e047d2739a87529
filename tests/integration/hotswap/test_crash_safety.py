"""kill -9 at every step of a swap: the restarted agent serves the old or the new engine.

The agent runs as a real subprocess (``jetfleet-agent run``) against the real Mosquitto; the
variable ``JETFLEET_TEST_PAUSE_AT`` stops it at a named checkpoint (tests/agent_pause/), the test
SIGKILLs it there and starts it again on the same state directory. The restarted agent must
serve the model as soon as its port answers (from the swap journal, before any reconcile), and
the version must be the old one for a kill before the journal commit and the new one after
(never nothing, never a half-loaded engine).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from controller.demo.sample_models import classifier
from shared.codec import encode
from shared.messages import ArtifactRef, DesiredState, ModelSlot
from shared.topics import Channel, Topics
from tests.agent_pause import SWAP_ENV, SWAP_MARKER, pythonpath
from tests.integration.agent.artifact_server import ArtifactServer
from tests.ports import free_port

DEVICE = "gw-crash"
BODY = {"inputs": [{"name": "image", "shape": [1, 3, 32, 32], "datatype": "FP32",
                    "data": [0.5] * 3072}]}  # fmt: skip
STEPS_OLD = ["swap:begin", "swap:loaded", "swap:validated"]
STEPS_NEW = ["swap:committed", "swap:switched", "swap:drained"]


@pytest.fixture
def artifact_server() -> Iterator[ArtifactServer]:
    server = ArtifactServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def desired(generation: int, version: str, ref: ArtifactRef) -> DesiredState:
    return DesiredState(
        device_id=DEVICE,
        generation=generation,
        issued_at=datetime.now(timezone.utc),
        slots=(ModelSlot(name="classifier", version=version, artifact=ref),),
    )


class Agent:
    def __init__(self, broker: str, prefix: str, state: Path, port: int, pause: str | None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("JETFLEET_")}
        env |= {
            "JETFLEET_DEVICE_ID": DEVICE,
            "JETFLEET_BROKER_URL": broker,
            "JETFLEET_STATE_DIR": str(state),
            "JETFLEET_SERVE_ADDRESS": f"127.0.0.1:{port}",
            "JETFLEET_TOPIC_PREFIX": prefix,
            "JETFLEET_RUNTIME": "onnxruntime",
            "JETFLEET_DISABLED_COLLECTORS": '["jetson", "jtop", "nvml"]',
        }
        if pause:
            env[SWAP_ENV] = pause
            env["PYTHONPATH"] = pythonpath(env)
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "jetfleet-agent"), "run"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def first_answer(self, timeout: float = 60) -> httpx.Response:
        """The model's infer answer at the first moment the port accepts connections."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "agent exited"
            try:
                return httpx.post(f"{self.url}/v2/models/classifier/infer", json=BODY, timeout=30)
            except httpx.TransportError:
                time.sleep(0.05)
        raise AssertionError("agent never served")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.mark.parametrize("step", STEPS_OLD + STEPS_NEW)
def test_kill_at_each_swap_step_restarts_serving_old_or_new(
    step: str, mosquitto: str, artifact_server: ArtifactServer, tmp_path: Path
) -> None:
    v1 = artifact_server.add("v1.onnx", classifier(seed=1))
    v2 = artifact_server.add("v2.onnx", classifier(seed=2))
    topics = Topics(f"crash-{uuid.uuid4().hex[:10]}/v1")
    (tmp_path / "desired.json").write_bytes(encode(desired(1, "1", v1)))
    port = free_port()
    agent = Agent(mosquitto, topics.prefix, tmp_path, port, pause=step)
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"t-{uuid.uuid4().hex}")
    parts = urlsplit(mosquitto)
    client.connect(parts.hostname or "127.0.0.1", parts.port or 1883)
    client.loop_start()
    topic = topics.device(DEVICE, Channel.DESIRED)
    try:
        deadline = time.monotonic() + 60
        while True:
            r = agent.first_answer()
            if r.status_code == 200:
                break
            assert time.monotonic() < deadline, r.text
            time.sleep(0.1)
        assert r.json()["model_version"] == "1"
        client.publish(topic, encode(desired(2, "2", v2)), qos=1, retain=True).wait_for_publish(5)
        marker = tmp_path / SWAP_MARKER
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert time.monotonic() < deadline, f"agent never reached {step}"
            time.sleep(0.05)
        marker.unlink()
        agent.kill()
        # Paused again at the next swap's start, the restarted agent shows what the journal
        # restored: reconcile (towards version 2) cannot overtake the first request.
        restarted = Agent(mosquitto, topics.prefix, tmp_path, port, pause="swap:begin")
        try:
            answer = restarted.first_answer()
            assert answer.status_code == 200, answer.text
            expected = "1" if step in STEPS_OLD else "2"
            assert answer.json()["model_version"] == expected
        finally:
            restarted.kill()
    finally:
        if agent.proc.poll() is None:
            agent.kill()
        client.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)
        client.loop_stop()
        client.disconnect()
