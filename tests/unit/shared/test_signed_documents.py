"""Whole desired documents signed with the fleet key: the signed bytes survive the wire, and the
agent's decision (shared.trust_policy.check_document) refuses what the controller did not sign.

Signatures are real ed25519 signatures made and checked with real keys.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.codec import decode, encode
from shared.delegate import DelegateConfig
from shared.manifests import DocumentSignature, KeyEndorsement
from shared.messages import ArtifactRef, DesiredState, ModelSlot, ServingSettings
from shared.trust_policy import (
    DocumentReason,
    PinnedKeys,
    SignedDocument,
    check_document,
    document_signing_key,
)
from tests.signing_keys import NOW, SHA_A, SHA_B, Key, new_key, verify

FLEET = new_key()
NEXT = new_key()
STRANGER = new_key()


def document(generation: int = 7, **changes: object) -> DesiredState:
    slot = ModelSlot(
        name="detector",
        version="2",
        artifact=ArtifactRef(
            url=f"http://c:8080/api/v1/artifacts/{SHA_A}",
            sha256=SHA_A,
            size=100,
            signed=FLEET.manifest(),
        ),
        serving=ServingSettings(max_batch_size=4, max_queue_delay_ms=2.5),
    )
    doc = DesiredState(device_id="gw-1", generation=generation, issued_at=NOW, slots=(slot,))
    return doc.model_copy(update=changes)


def signed(doc: DesiredState, key: Key = FLEET) -> DesiredState:
    signature = DocumentSignature(key_id=key.key_id, signature=key.sign(doc.signing_payload()))
    return doc.model_copy(update={"signature": signature})


def pinned(key: Key = FLEET, *retired: Key) -> PinnedKeys:
    return PinnedKeys(key.key_id, key.public, frozenset({key.key_id, *(k.key_id for k in retired)}))


def decide(
    doc: DesiredState, keys: PinnedKeys | None = None, last_accepted: int = -1
) -> DocumentReason | None:
    wire = decode(DesiredState, encode(doc))
    refusal = check_document(
        SignedDocument(wire.generation, wire.signature, wire.signing_payload(), wire.fleet_keys),
        keys if keys is not None else pinned(),
        last_accepted,
        verify,
    )
    return None if refusal is None else refusal.reason


# --- the signed bytes ---------------------------------------------------------------------------


@given(
    generation=st.integers(min_value=0, max_value=2**53),
    offset_minutes=st.integers(min_value=-12 * 60, max_value=14 * 60),
    delay=st.floats(min_value=0, max_value=10_000, allow_nan=False),
    micro=st.integers(min_value=0, max_value=999_999),
)
def test_a_signed_document_verifies_after_encode_and_decode(
    generation: int, offset_minutes: int, delay: float, micro: int
) -> None:
    issued = datetime(
        2026, 6, 1, 12, 0, 0, micro, tzinfo=timezone(timedelta(minutes=offset_minutes))
    )
    base = document(generation)
    slot = base.slots[0].model_copy(
        update={"serving": ServingSettings(max_batch_size=2, max_queue_delay_ms=delay)}
    )
    doc = signed(base.model_copy(update={"issued_at": issued, "slots": (slot,)}))
    wire = decode(DesiredState, encode(doc))
    assert wire.signature == doc.signature
    assert wire.signing_payload() == doc.signing_payload()
    assert wire.signature is not None
    assert verify(FLEET.public, wire.signing_payload(), wire.signature.signature)


def test_the_payload_is_the_canonical_document_without_its_signature() -> None:
    doc = document()
    payload = doc.signing_payload()
    assert signed(doc).signing_payload() == payload
    assert b'"signature":{' not in payload
    assert payload == json.dumps(
        json.loads(encode(doc)), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")
    assert json.loads(payload)["schema"] == "jetfleet/desired/1"


def test_an_unsigned_document_has_no_signature_field_on_the_wire() -> None:
    assert "signature" not in json.loads(encode(document()))
    assert "signature" in json.loads(encode(signed(document())))


# --- the decision -------------------------------------------------------------------------------


def test_a_document_signed_by_the_pinned_key_is_accepted() -> None:
    assert decide(signed(document())) is None


def test_an_agent_without_a_pinned_key_accepts_unsigned_documents() -> None:
    refusal = check_document(SignedDocument(7, None, document().signing_payload()), None, 9, verify)
    assert refusal is None


def test_an_unsigned_document_is_refused() -> None:
    assert decide(document()) is DocumentReason.UNSIGNED


def test_a_document_signed_by_another_key_is_refused() -> None:
    assert decide(signed(document(), STRANGER)) is DocumentReason.UNKNOWN_KEY


def test_a_signature_naming_the_pinned_key_but_made_by_another_is_bad() -> None:
    doc = document()
    forged = DocumentSignature(key_id=FLEET.key_id, signature=STRANGER.sign(doc.signing_payload()))
    assert decide(doc.model_copy(update={"signature": forged})) is DocumentReason.BAD_SIGNATURE


@pytest.mark.parametrize(
    "change",
    [
        {"generation": 10**9},
        {"slots": ()},
        {"device_id": "gw-2"},
        {"issued_at": NOW + timedelta(seconds=1)},
    ],
    ids=["generation", "slots", "device", "issued_at"],
)
def test_a_valid_document_with_one_field_changed_is_refused(change: dict[str, object]) -> None:
    doc = signed(document())
    assert decide(doc.model_copy(update=change)) is DocumentReason.BAD_SIGNATURE


def test_a_changed_serving_setting_or_delegate_is_refused() -> None:
    doc = signed(document())
    slot = doc.slots[0]
    for changed in (
        slot.model_copy(update={"serving": ServingSettings(max_batch_size=64)}),
        slot.model_copy(update={"delegate": DelegateConfig(precision="fp16")}),
        slot.model_copy(update={"artifact": slot.artifact.model_copy(update={"sha256": SHA_B})}),
    ):
        assert decide(doc.model_copy(update={"slots": (changed,)})) is (
            DocumentReason.BAD_SIGNATURE
        )


def test_a_manifest_signature_never_passes_for_a_document_signature() -> None:
    doc = document()
    manifest = FLEET.manifest()
    copied = DocumentSignature(key_id=FLEET.key_id, signature=manifest.signature)
    assert decide(doc.model_copy(update={"signature": copied})) is DocumentReason.BAD_SIGNATURE


def test_an_older_generation_is_a_replay_and_the_same_one_a_republish() -> None:
    old = signed(document(generation=5))
    assert decide(old, last_accepted=6) is DocumentReason.REPLAY
    assert decide(old, last_accepted=5) is None
    assert decide(old, last_accepted=4) is None


def test_signature_problems_are_reported_before_replay() -> None:
    assert decide(document(generation=1), last_accepted=6) is DocumentReason.UNSIGNED


# --- rotation -----------------------------------------------------------------------------------


def test_a_document_signed_by_the_key_its_chain_endorses_is_accepted() -> None:
    doc = signed(document(fleet_keys=(FLEET.endorse(NEXT),)), NEXT)
    assert decide(doc) is None
    key_id, _ = document_signing_key(pinned(), doc.fleet_keys, verify)
    assert key_id == NEXT.key_id


def test_a_chain_of_two_rotations_is_followed_to_its_end() -> None:
    third = new_key()
    chain = (FLEET.endorse(NEXT), NEXT.endorse(third))
    assert decide(signed(document(fleet_keys=chain), third)) is None
    assert decide(signed(document(fleet_keys=chain), NEXT)) is DocumentReason.UNKNOWN_KEY


def test_the_new_key_without_its_endorsement_is_unknown() -> None:
    assert decide(signed(document(), NEXT)) is DocumentReason.UNKNOWN_KEY


def test_a_chain_from_a_key_never_pinned_does_not_make_its_key_trusted() -> None:
    doc = signed(document(fleet_keys=(STRANGER.endorse(NEXT),)), NEXT)
    assert decide(doc) is DocumentReason.UNKNOWN_KEY


def test_an_endorsement_with_a_bad_signature_does_not_make_its_key_trusted() -> None:
    claims = KeyEndorsement(
        key_id=NEXT.key_id, public_key=NEXT.public, created=NOW, endorsed_by=FLEET.key_id
    )
    fake = claims.model_copy(update={"signature": NEXT.sign(claims.payload())})
    assert decide(signed(document(fleet_keys=(fake,)), NEXT)) is DocumentReason.UNKNOWN_KEY


def test_the_old_key_may_not_sign_a_document_whose_chain_retires_it() -> None:
    doc = signed(document(fleet_keys=(FLEET.endorse(NEXT),)), FLEET)
    assert decide(doc) is DocumentReason.UNKNOWN_KEY


def test_after_a_rotation_the_retired_key_is_refused_and_old_chains_still_pass() -> None:
    rotated = pinned(NEXT, FLEET)
    chain = (FLEET.endorse(NEXT),)
    assert decide(signed(document(fleet_keys=chain), NEXT), rotated) is None
    assert decide(signed(document(fleet_keys=chain), FLEET), rotated) is (
        DocumentReason.UNKNOWN_KEY
    )
    assert decide(signed(document(), FLEET), rotated) is DocumentReason.UNKNOWN_KEY
