"""Signed artifacts end to end: a real controller signs, a real agent that pinned
the fleet key at enrolment verifies, and an attacker who can publish desired documents on the
real Mosquitto tries tampered artifacts against it while it serves. Each attempt is refused with
its reason in the slot and in an ``artifact_refused`` event, and the version that served before
keeps answering real KServe v2 inference requests.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from agent.trust.store import TrustStore
from controller.db.schema import utcnow
from controller.demo.sample_models import anomaly, classifier
from controller.fleet.desired import artifact_url
from shared.manifests import SignedManifest
from shared.messages import ArtifactRef, Event, ModelSlot, SlotPhase
from shared.topics import Topics
from tests.agent_runner import RunningAgent
from tests.integration.agent.artifact_server import ArtifactServer
from tests.integration.signing.harness import (
    Wire,
    active_key,
    agent_settings,
    controller_settings,
    deploy_and_wait,
    document_signer,
    infer,
    push,
    signed_manifest_of,
    signer_of,
    start_controller,
)

DEVICE = "gw-sig"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("JETFLEET_") and not name.upper().startswith("JETFLEET_TEST"):
            monkeypatch.delenv(name)


def known_device(api: httpx.Client, device: str) -> None:
    deadline = time.monotonic() + 30
    while api.get(f"/api/v1/devices/{device}").status_code != 200:
        assert time.monotonic() < deadline, f"device {device} never reached the controller"
        time.sleep(0.05)


@pytest.mark.slow
def test_tampered_artifacts_are_refused_while_the_old_version_keeps_serving(
    mosquitto: str, tmp_path: Path, artifact_server: ArtifactServer
) -> None:
    prefix = f"jfsig/{uuid.uuid4().hex[:10]}"
    settings = controller_settings(mosquitto, tmp_path, prefix)
    controller = start_controller(settings)
    wire = Wire(controller.broker_url, Topics(prefix), DEVICE, document_signer(settings))
    api = httpx.Client(base_url=controller.http_url, timeout=30)
    key = active_key(settings)
    state = tmp_path / "agent"
    state.mkdir()
    identity = {
        "device_id": DEVICE,
        "fleet_key": {"key_id": key.key_id, "public_key": key.public_key},
    }
    (state / "identity.json").write_text(json.dumps(identity))
    agent = RunningAgent(agent_settings(DEVICE, mosquitto, prefix, state, controller.http_url))
    serve_url = agent.daemon.serve_url
    try:
        assert agent.daemon.verifier.trust.pinned, "the enrolment key is pinned"
        known_device(api, DEVICE)
        for version, seed in (("1", 1), ("2", 2), ("3", 3)):
            push(api, "classifier", version, classifier(seed=seed))
        push(api, "anomaly", "1", anomaly())

        deploy_and_wait(wire, api, "classifier", "1")
        deploy_and_wait(wire, api, "classifier", "2")
        assert infer(serve_url)["model_version"] == "2"

        # The operator goes back to 1: the controller authorises this device to roll back.
        generation = deploy_and_wait(wire, api, "classifier", "1")
        rollback_doc = wire.last_desired(generation)
        authorised = rollback_doc.slot("classifier")
        assert authorised is not None
        assert authorised.rollback is not None
        assert authorised.rollback.device_id == DEVICE
        assert infer(serve_url)["model_version"] == "1"

        deploy_and_wait(wire, api, "classifier", "2")
        installed = TrustStore.open(state).installed_models()["classifier"]
        assert installed.version == "2"
        base = wire.last_desired()
        v2 = base.slot("classifier")
        assert v2 is not None
        assert v2.artifact.signed is not None
        # 3 exists, so 2 is not the newest: its slot may be an authorised rollback too.
        assert v2.rollback is not None
        assert (v2.rollback.version, v2.rollback.device_id) == ("2", DEVICE)

        def attack(slot: ModelSlot, kind: str = "artifact_refused") -> Event:
            count = len(wire.events)
            wire.forge(base.model_copy(update={"slots": (slot,)}))
            event = wire.event_after(count, kind)
            assert event.slot == "classifier"
            status = wire.slot(
                "classifier",
                lambda s: s.phase is SlotPhase.FAILED and s.last_error == event.message,
                f"classifier failed with {event.message}",
            )
            assert status.active_version == "2"
            assert infer(serve_url)["model_version"] == "2"
            return event

        v3_manifest = signed_manifest_of(settings, "classifier", "3")
        v3_bytes = classifier(seed=3)
        v3_artifact = ArtifactRef(
            url=artifact_url(controller.http_url, v3_manifest.manifest.sha256),
            sha256=v3_manifest.manifest.sha256,
            size=len(v3_bytes),
            signed=v3_manifest,
        )
        v3 = v2.model_copy(update={"version": "3", "artifact": v3_artifact, "reference": None})

        # 1. One byte flipped in the artifact: the sha256 check of the download refuses it...
        flipped = bytearray(v3_bytes)
        flipped[len(flipped) // 2] ^= 0x01
        tampered = artifact_server.add("classifier-3.onnx", bytes(flipped))
        at_tampered = v3_artifact.model_copy(update={"url": tampered.url})
        event = attack(v3.model_copy(update={"artifact": at_tampered}), kind="download_failed")
        assert "sha256" in event.message
        downloads = len(artifact_server.requests)
        # ... named by its own sha256, the signed manifest is of other bytes ...
        renamed = at_tampered.model_copy(update={"sha256": tampered.sha256})
        event = attack(v3.model_copy(update={"artifact": renamed}))
        assert event.data["reason"] == "other_artifact"
        # ... and with the manifest's sha256 flipped to match too, its signature fails.
        altered = SignedManifest(
            manifest=v3_manifest.manifest.model_copy(update={"sha256": tampered.sha256}),
            signature=v3_manifest.signature,
        )
        event = attack(
            v3.model_copy(update={"artifact": renamed.model_copy(update={"signed": altered})})
        )
        assert event.data["reason"] == "bad_signature"
        assert "bad signature" in event.message
        assert len(artifact_server.requests) == downloads, "refused bytes are not even fetched"

        # 2. The signature of another artifact: copied onto this manifest, or with its manifest.
        other = signed_manifest_of(settings, "anomaly", "1")
        copied = SignedManifest(manifest=v3_manifest.manifest, signature=other.signature)
        event = attack(
            v3.model_copy(update={"artifact": v3_artifact.model_copy(update={"signed": copied})})
        )
        assert event.data["reason"] == "bad_signature"
        event = attack(
            v3.model_copy(update={"artifact": v3_artifact.model_copy(update={"signed": other})})
        )
        assert event.data["reason"] == "other_artifact"
        assert event.message.startswith("refused: signature of another artifact")

        # 3. An expired manifest: signed by the fleet key 31 days ago, valid for 30.
        m = v3_manifest.manifest
        with signer_of(settings, clock=lambda: utcnow() - timedelta(days=31)) as past:
            expired = past.sign_manifest("model", m.name, m.version, m.serial, m.sha256, m.size)
        event = attack(
            v3.model_copy(update={"artifact": v3_artifact.model_copy(update={"signed": expired})})
        )
        assert event.data["reason"] == "expired"

        # 4. No manifest at all.
        event = attack(
            v3.model_copy(update={"artifact": v3_artifact.model_copy(update={"signed": None})})
        )
        assert event.data["reason"] == "unsigned"

        # 5. Replays of version 1: with the rollback authorisation the controller gave for an
        # earlier generation, and with none.
        v1_serial = authorised.artifact.signed.manifest.serial  # type: ignore[union-attr]
        event = attack(authorised)
        assert event.data["reason"] == "rollback"
        assert "a replay" in event.message
        event = attack(authorised.model_copy(update={"rollback": None}))
        assert event.data["reason"] == "rollback"
        assert (
            f"older than installed (serial {v1_serial} < {installed.serial}) without rollback "
            "authorisation" in event.message
        )

        # The operator sees why on the controller.
        events = api.get(f"/api/v1/devices/{DEVICE}/events", params={"limit": 100}).json()
        refused = [e["message"] for e in events if e["kind"] == "artifact_refused"]
        assert any("expired" in m for m in refused)
        assert TrustStore.open(state).installed_models()["classifier"].version == "2"
    finally:
        agent.stop()
        wire.close()
        api.close()
        controller.stop()
