"""The agent's install decision (shared.trust_policy) over real ed25519 signatures.

Verdicts are computed with real keys, as the agent's adapter does, so "a signature copied from
another artifact" is a real signature that fails to verify here, not a flag set by hand.
"""

from __future__ import annotations

import itertools
import random
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.manifests import KeyEndorsement, SignedManifest
from shared.trust_policy import (
    Expected,
    Installed,
    Reason,
    RollbackEvidence,
    SignatureVerdict,
    check_manifest,
    endorsement_problem,
    follow_endorsements,
)
from tests.signing_keys import NOW, SHA_A, SHA_B, Key, new_key, verify

FLEET = new_key()
OTHER = new_key()
EXPECTED = Expected("model", "detector", "2", SHA_A, 100)


def verdict(signed: SignedManifest, keys: dict[str, Key] | None = None) -> SignatureVerdict:
    known = keys if keys is not None else {FLEET.key_id: FLEET}
    key = known.get(signed.manifest.key_id)
    if key is None:
        return "unknown_key"
    return "valid" if verify(key.public, signed.manifest.payload(), signed.signature) else "invalid"


def check(
    signed: SignedManifest | None,
    expected: Expected = EXPECTED,
    installed: Installed | None = None,
    rollback: RollbackEvidence | None = None,
    now: object = NOW,
) -> Reason | None:
    sig: SignatureVerdict = verdict(signed) if signed is not None else "invalid"
    refusal = check_manifest(signed, sig, expected, now, installed, rollback)  # type: ignore[arg-type]
    return None if refusal is None else refusal.reason


def test_a_valid_manifest_of_the_expected_bytes_is_accepted() -> None:
    assert check(FLEET.manifest()) is None


def test_no_manifest_is_refused_as_unsigned() -> None:
    refusal = check_manifest(None, "invalid", EXPECTED, NOW)
    assert refusal is not None
    assert refusal.reason is Reason.UNSIGNED
    assert "model detector 2 is unsigned" in refusal.message


def test_a_manifest_signed_by_a_key_never_pinned_is_refused_as_unknown_key() -> None:
    signed = OTHER.manifest()
    refusal = check_manifest(signed, verdict(signed), EXPECTED, NOW)
    assert refusal is not None
    assert refusal.reason is Reason.UNKNOWN_KEY
    assert OTHER.key_id in refusal.message


def test_a_manifest_signed_by_a_retired_key_is_refused() -> None:
    refusal = check_manifest(FLEET.manifest(), "retired_key", EXPECTED, NOW)
    assert refusal is not None
    assert refusal.reason is Reason.UNKNOWN_KEY
    assert "retired" in refusal.message


def test_a_signature_copied_from_another_artifact_does_not_verify() -> None:
    mine = FLEET.manifest()
    theirs = FLEET.manifest(name="keypoints", sha256=SHA_B)
    forged = SignedManifest(manifest=mine.manifest, signature=theirs.signature)
    assert check(forged) is Reason.BAD_SIGNATURE


def test_a_manifest_altered_to_match_tampered_bytes_fails_its_signature() -> None:
    original = FLEET.manifest()
    altered = original.manifest.model_copy(update={"sha256": SHA_B})
    forged = SignedManifest(manifest=altered, signature=original.signature)
    assert check(forged, Expected("model", "detector", "2", SHA_B, 100)) is Reason.BAD_SIGNATURE


def test_a_valid_manifest_of_another_artifact_is_refused_and_says_so() -> None:
    theirs = FLEET.manifest(name="keypoints", sha256=SHA_B)
    refusal = check_manifest(theirs, verdict(theirs), EXPECTED, NOW)
    assert refusal is not None
    assert refusal.reason is Reason.OTHER_ARTIFACT
    assert refusal.message.startswith("signature of another artifact")
    assert "keypoints" in refusal.message


@pytest.mark.parametrize(
    "expected",
    [
        Expected("model", "detector", "2", SHA_A, 101),
        Expected("model", "detector", "3", SHA_A, 100),
        Expected("model", "detector", "2", SHA_B, 100),
        Expected("model", "keypoints", "2", SHA_A, 100),
        Expected("engine", "detector", "2", SHA_A, 100),
    ],
    ids=["size", "version", "sha256", "name", "kind"],
)
def test_any_field_that_differs_from_the_slot_is_another_artifact(expected: Expected) -> None:
    assert check(FLEET.manifest(), expected) is Reason.OTHER_ARTIFACT


def test_a_manifest_is_valid_until_the_second_it_expires() -> None:
    signed = FLEET.manifest(expires=NOW + timedelta(seconds=1))
    assert check(signed) is None
    assert check(signed, now=NOW + timedelta(seconds=1)) is Reason.EXPIRED


def test_an_older_serial_than_installed_is_refused_without_authorisation() -> None:
    refusal = check_manifest(
        FLEET.manifest(serial=3), "valid", EXPECTED, NOW, installed=Installed(5, 4)
    )
    assert refusal is not None
    assert refusal.reason is Reason.ROLLBACK
    assert "older than installed (serial 3 < 5) without rollback authorisation" in refusal.message


@pytest.mark.parametrize("serial", [5, 6, 100])
def test_the_same_or_a_newer_serial_needs_no_authorisation(serial: int) -> None:
    assert check(FLEET.manifest(serial=serial), installed=Installed(5, 4)) is None


def rollback_evidence(auth_key: Key = FLEET, **changes: object) -> RollbackEvidence:
    fields: dict[str, object] = {"version": "2", "serial": 3, "generation": 9, **changes}
    auth = auth_key.rollback(**fields)  # type: ignore[arg-type]
    keys = {FLEET.key_id: FLEET}
    key = keys.get(auth.key_id)
    sig: SignatureVerdict = (
        "unknown_key"
        if key is None
        else "valid"
        if verify(key.public, auth.payload(), auth.signature)
        else "invalid"
    )
    return RollbackEvidence(auth, sig, "gw-1")


def test_a_valid_rollback_authorisation_allows_the_older_serial() -> None:
    evidence = rollback_evidence(generation=9)
    assert check(FLEET.manifest(serial=3), installed=Installed(5, 4), rollback=evidence) is None


@pytest.mark.parametrize(
    ("evidence", "words"),
    [
        (rollback_evidence(device_id="gw-2"), "issued for device gw-2"),
        (rollback_evidence(serial=2), "(serial 2)"),
        (rollback_evidence(model="keypoints"), "issued for keypoints"),
        (rollback_evidence(expires=NOW), "expired"),
        (rollback_evidence(generation=4), "a replay"),
        (rollback_evidence(generation=3), "a replay"),
        (rollback_evidence(OTHER), "unknown key"),
    ],
    ids=["device", "serial", "model", "expired", "same-generation", "older-generation", "key"],
)
def test_a_rollback_authorisation_for_anything_else_is_refused(
    evidence: RollbackEvidence, words: str
) -> None:
    refusal = check_manifest(
        FLEET.manifest(serial=3), "valid", EXPECTED, NOW, Installed(5, 4), evidence
    )
    assert refusal is not None
    assert refusal.reason is Reason.ROLLBACK
    assert "rollback authorisation is refused" in refusal.message
    assert words in refusal.message


def test_a_rollback_authorisation_with_a_copied_signature_is_refused() -> None:
    good = FLEET.rollback(version="2", serial=3, generation=9)
    other = FLEET.rollback(version="2", serial=3, generation=10)
    forged = good.model_copy(update={"signature": other.signature})
    ok = verify(FLEET.public, forged.payload(), forged.signature)
    evidence = RollbackEvidence(forged, "valid" if ok else "invalid", "gw-1")
    refusal = check_manifest(
        FLEET.manifest(serial=3), "valid", EXPECTED, NOW, Installed(5, 4), evidence
    )
    assert refusal is not None
    assert "bad signature" in refusal.message


ORDER = [
    Reason.UNSIGNED,
    Reason.UNKNOWN_KEY,
    Reason.BAD_SIGNATURE,
    Reason.OTHER_ARTIFACT,
    Reason.EXPIRED,
    Reason.ROLLBACK,
]


@given(st.sets(st.sampled_from(ORDER)))
def test_the_first_defect_in_the_documented_order_is_the_one_reported(
    defects: set[Reason],
) -> None:
    signer = OTHER if Reason.UNKNOWN_KEY in defects else FLEET
    signed: SignedManifest | None = signer.manifest(
        sha256=SHA_B if Reason.OTHER_ARTIFACT in defects else SHA_A,
        expires=NOW if Reason.EXPIRED in defects else None,
        serial=3,
    )
    assert signed is not None
    if Reason.BAD_SIGNATURE in defects:
        signed = signed.model_copy(update={"signature": FLEET.manifest(serial=4).signature})
    if Reason.UNSIGNED in defects:
        signed = None
    installed = Installed(5 if Reason.ROLLBACK in defects else 3, 1)
    expected = next((r for r in ORDER if r in defects), None)
    assert check(signed, installed=installed) is expected


# --- rotation ----------------------------------------------------------------------------------


def test_a_chain_of_rotations_is_followed_from_the_pinned_key() -> None:
    k1, k2, k3 = new_key(), new_key(), new_key()
    chain = [k1.endorse(k2), k2.endorse(k3)]
    outcome = follow_endorsements(k1.key_id, k1.public, {k1.key_id}, chain, verify)
    assert [e.key_id for e in outcome.adopted] == [k2.key_id, k3.key_id]
    assert outcome.refused == ()


@given(st.randoms(use_true_random=False))
def test_the_chain_order_in_the_document_does_not_matter(rng: random.Random) -> None:
    keys = [FLEET, *(new_key() for _ in range(3))]
    chain = [a.endorse(b) for a, b in itertools.pairwise(keys)]
    rng.shuffle(chain)
    outcome = follow_endorsements(FLEET.key_id, FLEET.public, {FLEET.key_id}, chain, verify)
    assert [e.key_id for e in outcome.adopted] == [k.key_id for k in keys[1:]]


def test_links_the_agent_already_followed_are_ignored() -> None:
    k0, k1, k2 = new_key(), new_key(), new_key()
    chain = [k0.endorse(k1), k1.endorse(k2)]
    outcome = follow_endorsements(k2.key_id, k2.public, {k0.key_id, k1.key_id}, chain, verify)
    assert outcome == type(outcome)()


def test_an_endorsement_signed_by_an_unknown_key_is_refused() -> None:
    stranger, theirs = new_key(), new_key()
    outcome = follow_endorsements(
        FLEET.key_id, FLEET.public, {FLEET.key_id}, [stranger.endorse(theirs)], verify
    )
    assert outcome.adopted == ()
    [(endorsement, why)] = outcome.refused
    assert endorsement.key_id == theirs.key_id
    assert why == f"signed by unknown key {stranger.key_id}"


def test_an_endorsement_claiming_the_active_key_but_signed_by_another_is_refused() -> None:
    stranger, theirs = new_key(), new_key()
    genuine = stranger.endorse(theirs)
    forged = KeyEndorsement.model_validate(
        {**genuine.model_dump(by_alias=True), "endorsed_by": FLEET.key_id}
    )
    outcome = follow_endorsements(FLEET.key_id, FLEET.public, {FLEET.key_id}, [forged], verify)
    assert outcome.adopted == ()
    assert outcome.refused[0][1] == f"bad signature by key {FLEET.key_id}"


def test_an_endorsement_whose_key_id_is_not_its_keys_id_is_refused() -> None:
    new, impostor = new_key(), new_key()
    unsigned = KeyEndorsement(
        key_id=impostor.key_id, public_key=new.public, created=NOW, endorsed_by=FLEET.key_id
    )
    lying = unsigned.model_copy(update={"signature": FLEET.sign(unsigned.payload())})
    problem = endorsement_problem(lying, FLEET.public, verify)
    assert problem is not None
    assert "is not the id of its public key" in problem


def test_a_fork_from_a_retired_key_is_refused() -> None:
    k1, k2, k5 = new_key(), new_key(), new_key()
    chain = [k1.endorse(k2), k1.endorse(k5)]
    outcome = follow_endorsements(k2.key_id, k2.public, {k1.key_id, k2.key_id}, chain, verify)
    assert outcome.adopted == ()
    assert [(e.key_id, why) for e, why in outcome.refused] == [
        (k5.key_id, f"endorsed by key {k1.key_id}, which is no longer the active key")
    ]
