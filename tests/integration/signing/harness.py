"""A real controller, a real agent (in-process daemon) and a real MQTT client that watches the
device's topics and plays the attacker who can publish desired documents."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import numpy as np
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from agent.settings import AgentSettings
from controller.db.repository import Repository
from controller.db.schema import utcnow
from controller.db.session import make_engine
from controller.db.signing_store import KeyRecord, SigningStore
from controller.fleet.desired import PlannedSlot
from controller.server import Controller
from controller.settings import Settings
from controller.trust.signing import FleetSigner
from shared.codec import decode, encode
from shared.delegate import DelegateConfig
from shared.manifests import SignedManifest
from shared.messages import DesiredState, Event, ReportedState, SlotPhase, SlotStatus
from shared.topics import Channel, Topics
from tests.ports import free_port

T = TypeVar("T")


def controller_settings(broker: str, tmp_path: Path, prefix: str) -> Settings:
    return Settings(
        db_url=f"sqlite:///{tmp_path}/controller.db",
        broker_url=broker,
        data_dir=tmp_path / "data",
        http_port=0,
        topic_prefix=prefix,
        auto_migrate=True,
        auth_required=False,
    )


def start_controller(settings: Settings) -> Controller:
    controller = Controller(settings)
    controller.start()
    try:
        controller.serve_in_thread()
    except BaseException:
        controller.stop()
        raise
    return controller


@contextmanager
def signer_of(
    settings: Settings, clock: Callable[[], datetime] | None = None
) -> Iterator[FleetSigner]:
    """The controller's signer as a second process opens it (same database and data dir)."""
    engine = make_engine(settings.db_url)
    try:
        store = SigningStore(engine)
        yield FleetSigner(store, settings.data_dir, clock=clock or utcnow)
    finally:
        engine.dispose()


def document_signer(settings: Settings) -> Callable[[DesiredState], DesiredState]:
    """Signs a desired document with the fleet's active key (whatever its chain says)."""

    def sign(doc: DesiredState) -> DesiredState:
        with signer_of(settings) as signer:
            key = signer.active()
            assert key is not None
            return signer.sign_document(doc, key)

    return sign


def active_key(settings: Settings) -> KeyRecord:
    with signer_of(settings) as signer:
        key = signer.active()
    assert key is not None, "jetfleet serve creates the fleet key at start"
    return key


def signed_manifest_of(settings: Settings, model: str, version: str) -> SignedManifest:
    """The controller-signed manifest of ``model:version`` (stored, or signed now)."""
    engine = make_engine(settings.db_url)
    try:
        record = Repository(engine).find_version(model, version)
    finally:
        engine.dispose()
    assert record is not None, f"{model}:{version} is not stored"
    slot = PlannedSlot(
        name=model,
        version=version,
        sha256=record.sha256,
        size=record.size,
        delegate=DelegateConfig(),
        model_version_id=record.id,
    )
    with signer_of(settings) as signer:
        return signer.model_manifests([slot])[record.id]


class Wire:
    """A real MQTT client on one device's topics: collects desired, reported and events, and
    publishes forged desired documents (the attacker with broker access)."""

    def __init__(
        self,
        broker_url: str,
        topics: Topics,
        device: str,
        sign: Callable[[DesiredState], DesiredState] | None = None,
    ) -> None:
        self.topics = topics
        self.device = device
        self.sign = sign
        """Signs forged documents (an attacker with the fleet key: artifact checks are next)."""
        self.desired: list[DesiredState] = []
        self.reported: list[ReportedState] = []
        self.events: list[Event] = []
        self.cond = threading.Condition()
        parts = urlsplit(broker_url)
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"wire-{uuid.uuid4().hex}")
        self.client.on_message = self._on_message
        subscribed = threading.Event()
        self.client.on_subscribe = lambda *args: subscribed.set()
        self.client.connect(parts.hostname or "127.0.0.1", parts.port or 1883)
        self.client.loop_start()
        self.client.subscribe(f"{topics.prefix}/{device}/#", qos=1)
        assert subscribed.wait(10), "subscription not acknowledged"

    def _on_message(self, _c: Any, _u: Any, msg: mqtt.MQTTMessage) -> None:
        parsed = self.topics.parse(msg.topic)
        payload = bytes(msg.payload)
        if parsed is None or not payload:
            return
        with self.cond:
            if parsed[1] is Channel.DESIRED:
                self.desired.append(decode(DesiredState, payload))
            elif parsed[1] is Channel.REPORTED:
                self.reported.append(decode(ReportedState, payload))
            elif parsed[1] is Channel.EVENTS:
                self.events.append(decode(Event, payload))
            self.cond.notify_all()

    def wait(self, check: Callable[[], T | None], what: str, timeout: float = 60) -> T:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                found = check()
                if found:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}")
                self.cond.wait(left)

    def last_desired(self, generation: int | None = None) -> DesiredState:
        def found() -> DesiredState | None:
            docs = [d for d in self.desired if generation is None or d.generation == generation]
            return docs[-1] if docs else None

        return self.wait(found, f"desired generation {generation}")

    def forge(self, doc: DesiredState) -> DesiredState:
        """Publish ``doc`` as the retained desired document with the next generation."""
        with self.cond:
            generation = max(d.generation for d in self.desired) + 1
        forged = doc.model_copy(update={"generation": generation, "signature": None})
        if self.sign is not None:
            forged = self.sign(forged)
        topic = self.topics.device(self.device, Channel.DESIRED)
        self.client.publish(topic, encode(forged), qos=1, retain=True).wait_for_publish(10)
        self.last_desired(generation)
        return forged

    def slot(
        self, name: str, check: Callable[[SlotStatus], bool], what: str, after: int = 0
    ) -> SlotStatus:
        """A slot status matching ``check`` in a report after the first ``after`` reports."""

        def found() -> SlotStatus | None:
            for report in reversed(self.reported[after:]):
                for s in report.slots:
                    if s.name == name and check(s):
                        return s
            return None

        return self.wait(found, what)

    def serving(self, name: str, version: str, after: int = 0) -> SlotStatus:
        return self.slot(
            name,
            lambda s: s.phase is SlotPhase.SERVING and s.active_version == version,
            f"{name} serving {version}",
            after,
        )

    def event_after(self, count: int, kind: str) -> Event:
        """The first event of ``kind`` among those that arrived after the first ``count``."""

        def found() -> Event | None:
            return next((e for e in self.events[count:] if e.kind == kind), None)

        return self.wait(found, f"a {kind} event")

    def close(self) -> None:
        for ch in (Channel.DESIRED, Channel.REPORTED, Channel.STATUS):
            topic = self.topics.device(self.device, ch)
            self.client.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)
        self.client.disconnect()
        self.client.loop_stop()


def agent_settings(
    device: str, broker: str, prefix: str, state_dir: Path, controller_url: str
) -> AgentSettings:
    return AgentSettings(
        device_id=device,
        broker_url=broker,
        state_dir=state_dir,
        serve_address=f"127.0.0.1:{free_port()}",
        topic_prefix=prefix,
        telemetry_interval_s=5.0,
        controller_url=controller_url,
    )


def push(api: httpx.Client, name: str, version: str, data: bytes) -> dict[str, Any]:
    response = api.put(f"/api/v1/models/{name}/versions/{version}", content=data)
    assert response.status_code in (200, 201), response.text
    result: dict[str, Any] = response.json()
    return result


def deploy_and_wait(wire: Wire, api: httpx.Client, model: str, version: str) -> int:
    """Deploy through the controller's API; wait until the agent reports it serving."""
    count = len(wire.reported)
    generation = deploy(api, wire.device, model, version)
    wire.serving(model, version, after=count)
    return generation


def deploy(api: httpx.Client, device: str, model: str, version: str) -> int:
    response = api.post(
        "/api/v1/deployments", json={"model": model, "version": version, "device": device}
    )
    assert response.status_code == 200, response.text
    return int(response.json()["devices"][0]["generation"])


def infer(serve_url: str, model: str = "classifier") -> dict[str, Any]:
    """A real KServe v2 inference request to the agent."""
    image = np.full((1, 3, 32, 32), 0.5, dtype=np.float32)
    body = {
        "inputs": [
            {"name": "image", "shape": [1, 3, 32, 32], "datatype": "FP32", "data": image.tolist()}
        ]
    }
    response = httpx.post(f"{serve_url}/v2/models/{model}/infer", json=body, timeout=10)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result
