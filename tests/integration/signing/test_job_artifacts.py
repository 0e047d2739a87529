"""A tuning job's model is checked like a slot's: built and timed on the device only when signed.

The verifier over a real trust file pinned the way enrolment pins it; manifests signed with real
ed25519 keys. (End to end, the controller attaches the version's signed manifest to the job.)
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from agent.trust.store import TrustStore
from agent.trust.verifier import ArtifactRefused, ArtifactVerifier
from shared.jobs import JobArtifact
from tests.integration.signing.test_trust_store import enrol
from tests.signing_keys import NOW, SHA_A, SHA_B, new_key

FLEET = new_key()


def verifier(state: Path) -> ArtifactVerifier:
    enrol(state, FLEET.key_id, FLEET.public)
    return ArtifactVerifier(TrustStore.open(state), "gw-1", clock=lambda: NOW)


def artifact(**changes: object) -> JobArtifact:
    base = {"url": "http://c/a", "sha256": SHA_A, "size": 100}
    return JobArtifact.model_validate({**base, **changes})


def test_a_signed_job_model_is_accepted(tmp_path: Path) -> None:
    signed = FLEET.manifest(name="detector", version="2", sha256=SHA_A, size=100)
    verifier(tmp_path).check_job_artifact("detector", "2", artifact(signed=signed))


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("unsigned", "unsigned"),
        ("other artifact", "other_artifact"),
        ("other key", "unknown_key"),
        ("expired", "expired"),
    ],
)
def test_a_job_model_that_fails_its_manifest_is_refused_before_download(
    tmp_path: Path, case: str, reason: str
) -> None:
    signed = {
        "unsigned": None,
        "other artifact": FLEET.manifest(name="detector", version="2", sha256=SHA_B, size=100),
        "other key": new_key().manifest(name="detector", version="2", sha256=SHA_A, size=100),
        "expired": FLEET.manifest(
            name="detector",
            version="2",
            sha256=SHA_A,
            size=100,
            expires=datetime(2026, 5, 1, tzinfo=timezone.utc),
        ),
    }[case]
    with pytest.raises(ArtifactRefused) as refused:
        verifier(tmp_path).check_job_artifact("detector", "2", artifact(signed=signed))
    assert refused.value.reason == reason


def test_an_agent_never_enrolled_runs_unsigned_job_models(tmp_path: Path) -> None:
    ArtifactVerifier(TrustStore.open(tmp_path), "gw-1").check_job_artifact(
        "detector", "2", artifact()
    )
