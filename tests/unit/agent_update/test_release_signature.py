"""An agent release is verified against the pinned fleet key as a model is (real ed25519)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.trust.store import TrustStore
from agent.trust.verifier import ArtifactRefused, ArtifactVerifier
from shared.agent_releases import AGENT_ARTIFACT_NAME, AgentReleaseArtifact
from shared.manifests import SignedManifest
from tests.signing_keys import NOW, SHA_A, Key, new_key, verify


def verifier(tmp_path: Path, key: Key | None) -> ArtifactVerifier:
    store = TrustStore.open(tmp_path)
    if key is not None:
        store.pin(key.key_id, key.public)
    return ArtifactVerifier(store, "gw-1", clock=lambda: NOW, verify=verify)


def artifact(signed: SignedManifest | None) -> AgentReleaseArtifact:
    return AgentReleaseArtifact(url="/a.deb", sha256=SHA_A, size=100, format="deb", signed=signed)


def signed(key: Key, **change: object) -> SignedManifest:
    fields: dict[str, object] = {"kind": "agent", "name": AGENT_ARTIFACT_NAME, "version": "0.3.0"}
    return key.manifest(**(fields | change))  # type: ignore[arg-type]


def test_a_release_signed_by_the_fleet_key_passes(tmp_path: Path) -> None:
    key = new_key()
    verifier(tmp_path, key).check_agent_release("0.3.0", artifact(signed(key)))


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda key: None, "unsigned"),
        (lambda key: signed(new_key()), "unknown key"),
        (lambda key: signed(key, version="0.4.0"), "another artifact"),
        (lambda key: signed(key, kind="model"), "another artifact"),
        (lambda key: signed(key, sha256="b" * 64), "another artifact"),
    ],
)
def test_a_release_the_fleet_key_did_not_sign_as_such_is_refused(
    tmp_path: Path, make: object, words: str
) -> None:
    key = new_key()
    with pytest.raises(ArtifactRefused, match=words):
        verifier(tmp_path, key).check_agent_release("0.3.0", artifact(make(key)))  # type: ignore[operator]


def test_an_unenrolled_agent_installs_unverified(tmp_path: Path) -> None:
    verifier(tmp_path, None).check_agent_release("0.3.0", artifact(None))
