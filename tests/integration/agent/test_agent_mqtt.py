"""The agent end to end against the real Mosquitto: desired → serving → telemetry → failure."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import numpy as np
import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from agent.settings import AgentSettings
from controller.demo.sample_models import classifier
from shared.codec import decode_for, encode
from shared.messages import (
    ArtifactRef,
    DesiredState,
    Event,
    ModelSlot,
    ReportedState,
    ServingSettings,
    SlotPhase,
    Status,
)
from shared.telemetry import Telemetry
from shared.topics import Channel, Topics
from tests.agent_runner import RunningAgent
from tests.integration.agent.artifact_server import ArtifactServer
from tests.integration.batching.test_dynamic_batching import dense, metric
from tests.ports import free_port

T = TypeVar("T")
DEVICE = "gw-e2e"


class Observer:
    """A real MQTT client that plays the controller: publishes desired, collects the rest."""

    def __init__(self, broker_url: str, topics: Topics) -> None:
        self.topics = topics
        self.messages: list[Any] = []
        self.cond = threading.Condition()
        parts = urlsplit(broker_url)
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"obs-{uuid.uuid4().hex}")
        self.client.on_message = self._on_message
        subscribed = threading.Event()
        self.client.on_subscribe = lambda *args: subscribed.set()
        self.client.connect(parts.hostname or "127.0.0.1", parts.port or 1883)
        self.client.loop_start()
        self.client.subscribe(f"{topics.prefix}/{DEVICE}/#", qos=1)
        assert subscribed.wait(10), "observer subscription not acknowledged"

    def _on_message(self, client: Any, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        parsed = self.topics.parse(msg.topic)
        if parsed is None or not msg.payload or parsed[1] is Channel.DESIRED:
            return
        with self.cond:
            self.messages.append(decode_for(parsed[1], msg.payload))
            self.cond.notify_all()

    def publish_desired(self, desired: DesiredState | bytes) -> None:
        topic = self.topics.device(DEVICE, Channel.DESIRED)
        payload = desired if isinstance(desired, bytes) else encode(desired)
        self.client.publish(topic, payload, qos=1, retain=True).wait_for_publish(5)

    def wait_for(
        self, kind: type[T], check: Callable[[T], bool], what: str, timeout: float = 30
    ) -> T:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for m in reversed(self.messages):
                    if isinstance(m, kind) and check(m):
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [type(m).__name__ for m in self.messages[-10:]]
                    raise AssertionError(f"timed out waiting for {what}; last messages: {seen}")
                self.cond.wait(left)

    def close(self) -> None:
        for ch in (Channel.DESIRED, Channel.REPORTED, Channel.STATUS):
            topic = self.topics.device(DEVICE, ch)
            self.client.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("JETFLEET_") and not name.upper().startswith("JETFLEET_TEST"):
            monkeypatch.delenv(name)


@pytest.fixture
def topics() -> Topics:
    return Topics(f"test-{uuid.uuid4().hex[:12]}/v1")


@pytest.fixture
def observer(mosquitto: str, topics: Topics) -> Iterator[Observer]:
    obs = Observer(mosquitto, topics)
    try:
        yield obs
    finally:
        obs.close()


def settings_for(broker: str, topics: Topics, state_dir: Path) -> AgentSettings:
    return AgentSettings(
        device_id=DEVICE,
        labels={"site": "lab"},
        broker_url=broker,
        state_dir=state_dir,
        serve_address=f"127.0.0.1:{free_port()}",
        topic_prefix=topics.prefix,
        telemetry_interval_s=0.5,
    )


def desired(generation: int, version: str, ref: ArtifactRef) -> DesiredState:
    return DesiredState(
        device_id=DEVICE,
        generation=generation,
        issued_at=datetime.now(timezone.utc),
        slots=(ModelSlot(name="classifier", version=version, artifact=ref),),
    )


def slot_is(phase: SlotPhase, version: str) -> Callable[[ReportedState], bool]:
    def check(r: ReportedState) -> bool:
        return any(s.phase is phase and s.desired_version == version for s in r.slots)

    return check


def infer(serve_url: str) -> dict[str, Any]:
    image = np.full((1, 3, 32, 32), 0.5, dtype=np.float32)
    body = {
        "inputs": [
            {"name": "image", "shape": [1, 3, 32, 32], "datatype": "FP32", "data": image.tolist()}
        ]
    }
    response = httpx.post(f"{serve_url}/v2/models/classifier/infer", json=body, timeout=10)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_agent_serves_reports_and_keeps_the_old_version_when_an_update_fails(
    mosquitto: str,
    topics: Topics,
    observer: Observer,
    artifact_server: ArtifactServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    v1 = artifact_server.add("v1.onnx", classifier(seed=1))
    agent = RunningAgent(settings_for(mosquitto, topics, tmp_path))
    try:
        observer.wait_for(Status, lambda s: s.state == "online", "status online")
        malformed = encode(desired(1, "1", v1)).replace(b'"generation":1', b'"generation":"x"')
        with caplog.at_level(logging.WARNING, logger="agent.link.mqtt_link"):
            observer.publish_desired(malformed)
            deadline = time.monotonic() + 10
            while "field generation" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.05)
        assert "ignored malformed desired document" in caplog.text
        assert "field generation" in caplog.text
        observer.publish_desired(desired(1, "1", v1))
        observer.wait_for(ReportedState, slot_is(SlotPhase.BUILDING, "1"), "engine building")
        reported = observer.wait_for(
            ReportedState, slot_is(SlotPhase.SERVING, "1"), "classifier 1 serving"
        )
        assert reported.observed_generation == 1
        assert reported.labels == {"site": "lab"}
        assert reported.serve_url is not None
        assert reported.slots[0].active_version == "1"
        engine = reported.slots[0]
        assert (engine.runtime, engine.engine_source) == ("onnxruntime", "built")
        assert engine.engine_key is not None
        assert engine.tuning_matches is True
        assert engine.tuning_tag == "default"
        observer.wait_for(
            Event,
            lambda e: e.kind == "build_done" and e.data["engine_key"] == engine.engine_key,
            "build_done event",
        )
        assert (tmp_path / "engines" / f"{engine.engine_key}.engine").is_file()
        assert httpx.get(f"{reported.serve_url}/v2/health/ready").status_code == 200
        assert infer(reported.serve_url)["model_version"] == "1"

        sample = observer.wait_for(
            Telemetry,
            lambda t: any(m.name == "classifier" and m.requests >= 1 for m in t.models),
            "telemetry counting the request",
        )
        assert sample.sample_id.startswith(f"{DEVICE}:")
        assert sample.memory_total_bytes > 0
        stats = next(m for m in sample.models if m.name == "classifier")
        assert stats.version == "1"
        assert stats.errors == 0
        assert stats.latency_p50_ms is not None

        v2 = artifact_server.add("v2.onnx", classifier(seed=2))
        wrong = ArtifactRef(url=v2.url, sha256="f" * 64, size=v2.size)
        observer.publish_desired(desired(2, "2", wrong))
        failed = observer.wait_for(
            ReportedState, slot_is(SlotPhase.FAILED, "2"), "classifier 2 failed"
        )
        (slot,) = failed.slots
        assert failed.observed_generation == 2
        assert slot.active_version == "1"
        assert slot.last_error == f"sha256 mismatch: expected {'f' * 64}, got {v2.sha256}"
        assert infer(reported.serve_url)["model_version"] == "1"
        assert httpx.get(f"{reported.serve_url}/v2/health/ready").status_code == 503
        observer.wait_for(Event, lambda e: e.kind == "download_failed", "download_failed event")
        assert list((tmp_path / "downloads").iterdir()) == []
        assert sorted(p.name for p in (tmp_path / "models").iterdir()) == [f"{v1.sha256}.onnx"]
    finally:
        agent.stop()
    observer.wait_for(Status, lambda s: s.state == "offline", "status offline after stop")


def test_restarted_agent_serves_its_kept_models_before_the_broker_answers(
    mosquitto: str,
    topics: Topics,
    observer: Observer,
    artifact_server: ArtifactServer,
    tmp_path: Path,
) -> None:
    v1 = artifact_server.add("v1.onnx", classifier(seed=1))
    first = RunningAgent(settings_for(mosquitto, topics, tmp_path))
    try:
        observer.publish_desired(desired(1, "1", v1))
        observer.wait_for(ReportedState, slot_is(SlotPhase.SERVING, "1"), "classifier serving")
    finally:
        first.stop()
    artifact_server.stop()

    dead_broker = f"mqtt://127.0.0.1:{free_port()}"
    second = RunningAgent(settings_for(dead_broker, topics, tmp_path))
    try:
        url = second.daemon.serve_url
        deadline = time.monotonic() + 30
        while True:
            try:
                ready = httpx.get(f"{url}/v2/health/ready", timeout=2).status_code == 200
            except httpx.TransportError:
                ready = False
            if ready or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert ready, "restarted agent never became ready"
        assert infer(url)["model_version"] == "1"
    finally:
        second.stop()


def test_desired_serving_settings_turn_on_dynamic_batching(
    mosquitto: str,
    topics: Topics,
    observer: Observer,
    artifact_server: ArtifactServer,
    tmp_path: Path,
) -> None:
    ref = artifact_server.add("dense.onnx", dense(seed=3))
    agent = RunningAgent(settings_for(mosquitto, topics, tmp_path))
    try:
        slot = ModelSlot(
            name="dense",
            version="1",
            artifact=ref,
            serving=ServingSettings(max_batch_size=8, max_queue_delay_ms=20),
        )
        doc = DesiredState(
            device_id=DEVICE, generation=1, issued_at=datetime.now(timezone.utc), slots=(slot,)
        )
        observer.publish_desired(doc)
        observer.wait_for(
            ReportedState,
            lambda r: any(s.phase is SlotPhase.SERVING for s in r.slots),
            "dense serving",
        )
        url = agent.daemon.serve_url
        x = np.ones((1, 16), dtype=np.float32)
        body = {
            "inputs": [
                {"name": "x", "shape": [1, 16], "datatype": "FP32", "data": x.ravel().tolist()}
            ]
        }

        def call(_: int) -> int:
            return httpx.post(f"{url}/v2/models/dense/infer", json=body, timeout=10).status_code

        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(call, range(32))) == {200}
        text = httpx.get(f"{url}/metrics", timeout=5).text
        assert metric(text, "jetfleet_batches_total", model="dense") > 0
    finally:
        agent.stop()
