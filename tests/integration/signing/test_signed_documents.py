"""Signed desired documents end to end: a real controller signs every document it
publishes, a real agent that pinned the fleet key verifies each one before applying it, and an
attacker with publish access on the real Mosquitto tries to freeze, undeploy or replay. Each
forged document is refused with a ``desired_refused`` event (which reaches the controller's
events API), the agent's observed generation stays where it was, its kept ``desired.json`` is
untouched and the version that served keeps answering real KServe v2 requests.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from agent.slots.state_store import DESIRED_FILE, load_desired
from agent.trust.store import TrustStore
from controller.cli.main import cli
from controller.demo.sample_models import classifier
from controller.server import Controller
from controller.settings import Settings
from shared.codec import encode
from shared.manifests import DocumentSignature
from shared.messages import DesiredState, Event, ServingSettings
from shared.topics import Channel, Topics
from tests.agent_runner import RunningAgent
from tests.integration.signing.harness import (
    Wire,
    active_key,
    agent_settings,
    controller_settings,
    deploy_and_wait,
    infer,
    push,
    start_controller,
)
from tests.signing_keys import Key, new_key

DEVICE = "gw-doc"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("JETFLEET_") and not name.upper().startswith("JETFLEET_TEST"):
            monkeypatch.delenv(name)


class Fleet:
    """A controller, the attacker's wire, and an agent that pinned the fleet key."""

    def __init__(self, mosquitto: str, tmp_path: Path) -> None:
        self.prefix = f"jfdoc/{uuid.uuid4().hex[:10]}"
        self.settings: Settings = controller_settings(mosquitto, tmp_path, self.prefix)
        self.controller: Controller = start_controller(self.settings)
        self.wire = Wire(self.controller.broker_url, Topics(self.prefix), DEVICE)
        self.api = httpx.Client(base_url=self.controller.http_url, timeout=30)
        self.state = tmp_path / "agent"
        key = active_key(self.settings)
        TrustStore.open(self.state).pin(key.key_id, key.public_key)
        self.key_id = key.key_id
        self.mosquitto = mosquitto
        self.agent = self.start_agent()

    def start_agent(self) -> RunningAgent:
        return RunningAgent(
            agent_settings(
                DEVICE, self.mosquitto, self.prefix, self.state, self.controller.http_url
            )
        )

    def publish(self, doc: DesiredState) -> None:
        """Publish ``doc`` exactly as given, retained, as the controller would."""
        topic = self.wire.topics.device(DEVICE, Channel.DESIRED)
        self.wire.client.publish(topic, encode(doc), qos=1, retain=True).wait_for_publish(10)

    def refused(self, doc: DesiredState, reason: str) -> Event:
        """Publish ``doc``; the agent refuses it for ``reason`` and nothing moves."""
        before = self.agent.daemon.reported().observed_generation
        kept = (self.state / DESIRED_FILE).read_bytes()
        count = len(self.wire.events)
        self.publish(doc)
        event = self.wire.wait(
            lambda: next(
                (
                    e
                    for e in self.wire.events[count:]
                    if e.kind == "desired_refused" and e.data["generation"] == doc.generation
                ),
                None,
            ),
            f"desired_refused for generation {doc.generation}",
        )
        assert event.data["reason"] == reason, event.message
        assert event.data["source"] == "broker"
        assert self.agent.daemon.reported().observed_generation == before
        assert (self.state / DESIRED_FILE).read_bytes() == kept
        assert infer(self.agent.daemon.serve_url)["model_version"] == "2"
        return event

    def controller_events(self, count: int) -> list[dict[str, str]]:
        """The device's ``desired_refused`` events in the controller's events API (>= count)."""
        deadline = time.monotonic() + 60
        while True:
            response = self.api.get(f"/api/v1/devices/{DEVICE}/events", params={"limit": 200})
            assert response.status_code == 200, response.text
            found = [e for e in response.json() if e["kind"] == "desired_refused"]
            if len(found) >= count:
                return found
            assert time.monotonic() < deadline, f"controller has {len(found)} of {count} events"
            time.sleep(0.1)

    def close(self) -> None:
        self.agent.stop()
        self.wire.close()
        self.api.close()
        self.controller.stop()


@pytest.fixture
def fleet(mosquitto: str, tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(mosquitto, tmp_path)
    try:
        deadline = time.monotonic() + 30
        while f.api.get(f"/api/v1/devices/{DEVICE}").status_code != 200:
            assert time.monotonic() < deadline, "the device never reached the controller"
            time.sleep(0.05)
        for version, seed in (("1", 1), ("2", 2)):
            push(f.api, "classifier", version, classifier(seed=seed))
        deploy_and_wait(f.wire, f.api, "classifier", "1")
        deploy_and_wait(f.wire, f.api, "classifier", "2")
        yield f
    finally:
        f.close()


def resigned(doc: DesiredState, key: Key) -> DesiredState:
    unsigned = doc.model_copy(update={"signature": None})
    return unsigned.model_copy(
        update={
            "signature": DocumentSignature(
                key_id=key.key_id, signature=key.sign(unsigned.signing_payload())
            )
        }
    )


def test_forged_desired_documents_are_refused_and_the_device_keeps_serving(fleet: Fleet) -> None:
    current = fleet.wire.last_desired()
    assert current.signature is not None
    assert current.signature.key_id == fleet.key_id
    assert fleet.agent.daemon.reported().observed_generation == current.generation
    older = fleet.wire.last_desired(current.generation - 1)
    slot = current.slots[0]

    # Unsigned, with a huge generation and no slots: would freeze and undeploy the device.
    unsigned = current.model_copy(update={"generation": 10**9, "slots": (), "signature": None})
    fleet.refused(unsigned, "unsigned")
    # Signed by a key the agent never pinned (with its own endorsement from another stranger).
    stranger, other = new_key(), new_key()
    fleet.refused(
        resigned(current.model_copy(update={"generation": 10**9 + 1}), stranger),
        "unknown_key",
    )
    fleet.refused(
        resigned(
            current.model_copy(
                update={"generation": 10**9 + 2, "fleet_keys": (other.endorse(stranger),)}
            ),
            stranger,
        ),
        "unknown_key",
    )
    # The controller's own document with one field changed, its signature kept.
    fleet.refused(current.model_copy(update={"generation": 10**9 + 3}), "bad_signature")
    batching = slot.model_copy(update={"serving": ServingSettings(max_batch_size=512)})
    fleet.refused(
        current.model_copy(update={"generation": current.generation + 5, "slots": (batching,)}),
        "bad_signature",
    )
    # A valid, older document replayed: it would roll the device back to version 1.
    replay = fleet.refused(older, "replay")
    assert f"older than the accepted generation {current.generation}" in replay.message

    reported = fleet.api.get(f"/api/v1/devices/{DEVICE}").json()
    assert reported["observed_generation"] == current.generation
    messages = [e["message"] for e in fleet.controller_events(6)]
    assert any("unsigned" in m for m in messages)
    assert any("bad signature" in m for m in messages)
    assert any("a replay" in m for m in messages)

    # The controller's next real document is accepted although forged ones came after it.
    count = len(fleet.wire.reported)
    generation = deploy_and_wait(fleet.wire, fleet.api, "classifier", "1")
    assert generation == current.generation + 1
    assert infer(fleet.agent.daemon.serve_url)["model_version"] == "1"
    kept = load_desired(fleet.state)
    assert kept is not None
    assert kept.generation == generation
    assert len(fleet.wire.reported) > count


def test_a_tampered_kept_document_is_refused_at_start(fleet: Fleet) -> None:
    current = fleet.wire.last_desired()
    fleet.agent.stop()
    path = fleet.state / DESIRED_FILE
    tampered = current.model_copy(update={"slots": ()})
    path.write_bytes(encode(tampered))

    count, reports = len(fleet.wire.events), len(fleet.wire.reported)
    fleet.agent = fleet.start_agent()
    event = fleet.wire.wait(
        lambda: next(
            (
                e
                for e in fleet.wire.events[count:]
                if e.kind == "desired_refused" and e.data["source"] == DESIRED_FILE
            ),
            None,
        ),
        "the kept desired.json refused",
    )
    assert event.data["reason"] == "bad_signature"
    # The swap journal's version serves; the retained document from the broker is accepted.
    fleet.wire.serving("classifier", "2", after=reports)
    assert infer(fleet.agent.daemon.serve_url)["model_version"] == "2"
    fleet.wire.wait(
        lambda: (k := load_desired(fleet.state)) is not None and k.slots == current.slots,
        "desired.json rewritten from the broker",
    )


def test_a_republish_after_a_key_rotation_is_signed_with_the_new_key(fleet: Fleet) -> None:
    before = fleet.wire.last_desired()
    where = ["--db", fleet.settings.db_url, "--data-dir", str(fleet.settings.data_dir)]
    result = CliRunner().invoke(cli, ["keys", "rotate", *where, "--json"])
    assert result.exit_code == 0, result.output
    new_id = json.loads(result.output)["active"]["key_id"]

    count, docs = len(fleet.wire.events), len(fleet.wire.desired)
    assert fleet.controller.services.fleet.republish_all() == 1
    doc = fleet.wire.wait(
        lambda: next((d for d in fleet.wire.desired[docs:]), None), "the republished document"
    )
    assert doc.generation == before.generation
    assert doc.signature is not None
    assert doc.signature.key_id == new_id
    assert [e.key_id for e in doc.fleet_keys] == [new_id]
    rotated = fleet.wire.event_after(count, "key_rotated")
    assert rotated.data["key_id"] == new_id
    trust = TrustStore.open(fleet.state)
    active = trust.active_key()
    assert active is not None
    assert active.key_id == new_id
    kept = load_desired(fleet.state)
    assert kept is not None
    assert kept.signature == doc.signature

    # The retired key signs no more documents; the new key's next deployment is accepted.
    forged = doc.model_copy(update={"generation": doc.generation + 1, "signature": None})
    by_old = fleet.refused(_sign_with_retired(fleet, forged), "unknown_key")
    assert "retired key" in by_old.message
    deploy_and_wait(fleet.wire, fleet.api, "classifier", "1")


def _sign_with_retired(fleet: Fleet, doc: DesiredState) -> DesiredState:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pem = (fleet.settings.data_dir / "keys" / f"{fleet.key_id}.key").read_bytes()
    private = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(private, Ed25519PrivateKey)
    return resigned(doc, Key(private))
