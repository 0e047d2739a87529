"""Key rotation end to end: ``jetfleet keys rotate`` on the controller's host, the agent follows
the endorsement in its next desired document and accepts artifacts signed by the new key; it
refuses an endorsement signed by a key it never pinned, and artifacts signed by the retired key.
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
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent.trust.store import TrustStore
from controller.cli.main import cli
from controller.db.schema import utcnow
from controller.demo.sample_models import classifier
from shared.manifests import KeyEndorsement
from shared.messages import ModelSlot, SlotPhase
from shared.topics import Topics
from tests.agent_runner import RunningAgent
from tests.integration.signing.harness import (
    Wire,
    active_key,
    agent_settings,
    controller_settings,
    deploy_and_wait,
    document_signer,
    infer,
    push,
    signer_of,
    start_controller,
)
from tests.signing_keys import Key, new_key

DEVICE = "gw-rot"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("JETFLEET_") and not name.upper().startswith("JETFLEET_TEST"):
            monkeypatch.delenv(name)


def test_the_agent_follows_a_rotation_and_refuses_keys_it_cannot_trace(
    mosquitto: str, tmp_path: Path
) -> None:
    prefix = f"jfsig/{uuid.uuid4().hex[:10]}"
    settings = controller_settings(mosquitto, tmp_path, prefix)
    controller = start_controller(settings)
    wire = Wire(controller.broker_url, Topics(prefix), DEVICE, document_signer(settings))
    api = httpx.Client(base_url=controller.http_url, timeout=30)
    first = active_key(settings)
    state = tmp_path / "agent"
    TrustStore.open(state).pin(first.key_id, first.public_key)
    agent = RunningAgent(agent_settings(DEVICE, mosquitto, prefix, state, controller.http_url))
    serve_url = agent.daemon.serve_url
    try:
        deadline = time.monotonic() + 30
        while api.get(f"/api/v1/devices/{DEVICE}").status_code != 200:
            assert time.monotonic() < deadline, "the device never reached the controller"
            time.sleep(0.05)
        for version, seed in (("1", 1), ("2", 2), ("3", 3)):
            push(api, "classifier", version, classifier(seed=seed))
        deploy_and_wait(wire, api, "classifier", "1")

        where = ["--db", settings.db_url, "--data-dir", str(settings.data_dir)]
        result = CliRunner().invoke(cli, ["keys", "rotate", *where, "--json"])
        assert result.exit_code == 0, result.output
        rotated = json.loads(result.output)
        new_id = rotated["active"]["key_id"]
        assert rotated["retired"]["key_id"] == first.key_id

        count = len(wire.events)
        generation = deploy_and_wait(wire, api, "classifier", "2")
        doc = wire.last_desired(generation)
        slot = doc.slot("classifier")
        assert slot is not None
        assert slot.artifact.signed is not None
        assert slot.artifact.signed.manifest.key_id == new_id
        assert [(e.endorsed_by, e.key_id) for e in doc.fleet_keys] == [(first.key_id, new_id)]
        followed = wire.event_after(count, "key_rotated")
        assert followed.data == {"key_id": new_id, "endorsed_by": first.key_id}
        assert infer(serve_url)["model_version"] == "2"
        trust = TrustStore.open(state)
        active = trust.active_key()
        assert active is not None
        assert active.key_id == new_id
        retired = trust.key(first.key_id)
        assert retired is not None
        assert retired.retired_at is not None

        base = wire.last_desired()
        with signer_of(settings) as signer:
            v3 = signer.sign_manifest(
                "model", "classifier", "3", 99, slot.artifact.sha256, slot.artifact.size
            )
        v3_slot = slot.model_copy(update={"version": "3", "rollback": None})

        def forge(slot: ModelSlot, *endorsements: KeyEndorsement) -> tuple[int, int]:
            counts = len(wire.events), len(wire.reported)
            keys = base.fleet_keys + endorsements
            wire.forge(base.model_copy(update={"slots": (slot,), "fleet_keys": keys}))
            return counts

        def refused(counts: tuple[int, int], reason: str) -> str:
            event = wire.event_after(counts[0], "artifact_refused")
            assert event.data["reason"] == reason
            wire.slot(
                "classifier",
                lambda s: s.phase is SlotPhase.FAILED and s.last_error == event.message,
                "classifier failed",
                after=counts[1],
            )
            assert infer(serve_url)["model_version"] == "2"
            return event.message

        # An endorsement signed by a key the agent never pinned, and an artifact signed by the
        # key it names: the endorsement is refused, so the artifact's key is unknown.
        stranger, theirs = new_key(), new_key()
        by_theirs = theirs.manifest(
            name="classifier",
            version="3",
            serial=99,
            sha256=slot.artifact.sha256,
            size=slot.artifact.size,
            expires=utcnow() + timedelta(days=10),
        )
        counts = forge(
            v3_slot.model_copy(
                update={"artifact": v3_slot.artifact.model_copy(update={"signed": by_theirs})}
            ),
            stranger.endorse(theirs),
        )
        rejection = wire.event_after(counts[0], "key_refused")
        assert rejection.data["key_id"] == theirs.key_id
        assert rejection.data["reason"] == f"signed by unknown key {stranger.key_id}"
        assert theirs.key_id in refused(counts, "unknown_key")

        # An endorsement that claims the active key signed it: its signature says otherwise.
        claims = KeyEndorsement(
            key_id=theirs.key_id, public_key=theirs.public, created=utcnow(), endorsed_by=new_id
        )
        counts = forge(
            v3_slot.model_copy(
                update={"artifact": v3_slot.artifact.model_copy(update={"signed": by_theirs})}
            ),
            claims.model_copy(update={"signature": theirs.sign(claims.payload())}),
        )
        rejection = wire.event_after(counts[0], "key_refused")
        assert rejection.data["reason"] == f"bad signature by key {new_id}"
        refused(counts, "unknown_key")

        # The retired key's private half still exists on the controller's host; what it signs
        # now is refused.
        pem = (settings.data_dir / "keys" / f"{first.key_id}.key").read_bytes()
        private = serialization.load_pem_private_key(pem, password=None)
        assert isinstance(private, Ed25519PrivateKey)
        old = Key(private)
        by_old = old.manifest(
            name="classifier",
            version="3",
            serial=99,
            sha256=slot.artifact.sha256,
            size=slot.artifact.size,
            expires=utcnow() + timedelta(days=10),
        )
        counts = forge(
            v3_slot.model_copy(
                update={"artifact": v3_slot.artifact.model_copy(update={"signed": by_old})}
            )
        )
        assert "retired key" in refused(counts, "unknown_key")

        # Signed by the new key, the same slot is accepted.
        counts = forge(
            v3_slot.model_copy(
                update={"artifact": v3_slot.artifact.model_copy(update={"signed": v3})}
            )
        )
        wire.serving("classifier", "3", after=counts[1])
        assert infer(serve_url)["model_version"] == "3"
        active = TrustStore.open(state).active_key()
        assert active is not None
        assert active.key_id == new_id
    finally:
        agent.stop()
        wire.close()
        api.close()
        controller.stop()
