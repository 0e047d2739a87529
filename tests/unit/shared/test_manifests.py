"""Signed statements keep their signed bytes across the wire and never pass for one another."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.codec import decode, encode
from shared.manifests import (
    Manifest,
    RollbackAuthorization,
    SignedManifest,
    b64decode,
    key_id_of,
)
from shared.messages import ArtifactRef, DesiredState, ModelSlot
from tests.signing_keys import NOW, SHA_A, new_key, verify

KEY = new_key()

aware = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.timezones()
).filter(lambda d: d.utcoffset() is not None)


@given(
    name=st.from_regex(r"\A[a-z0-9][a-z0-9._-]{0,20}\Z"),
    version=st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9.+_-]{0,20}\Z"),
    serial=st.integers(min_value=0, max_value=2**53),
    size=st.integers(min_value=0, max_value=2**53),
    created=aware,
)
def test_a_manifest_verifies_after_travelling_in_a_desired_document(
    name: str, version: str, serial: int, size: int, created: datetime
) -> None:
    manifest = Manifest(
        kind="model",
        name=name,
        version=version,
        serial=serial,
        sha256=SHA_A,
        size=size,
        created=created,
        expires=created + timedelta(days=30, microseconds=7),
        key_id=KEY.key_id,
    )
    signed = SignedManifest(manifest=manifest, signature=KEY.sign(manifest.payload()))
    doc = DesiredState(
        device_id="gw-1",
        generation=1,
        issued_at=NOW,
        slots=(
            ModelSlot(
                name=name,
                version=version,
                artifact=ArtifactRef(url="http://c/a", sha256=SHA_A, size=size, signed=signed),
            ),
        ),
    )
    received = decode(DesiredState, encode(doc)).slots[0].artifact.signed
    assert received is not None
    assert received.manifest.payload() == manifest.payload()
    assert verify(KEY.public, received.manifest.payload(), received.signature)


def test_a_rollback_authorisation_signature_covers_every_field_but_itself() -> None:
    auth = KEY.rollback()
    assert verify(KEY.public, auth.payload(), auth.signature)
    assert auth.payload() == auth.model_copy(update={"signature": ""}).payload()
    for field, value in [
        ("device_id", "gw-2"),
        ("model", "other"),
        ("version", "9"),
        ("serial", 4),
        ("generation", 10),
        ("expires", NOW + timedelta(days=99)),
    ]:
        changed = auth.model_copy(update={field: value})
        assert not verify(KEY.public, changed.payload(), auth.signature), field


def test_statements_of_different_kinds_never_share_signed_bytes() -> None:
    auth = KEY.rollback()
    endorsement = KEY.endorse(new_key())
    payloads = [KEY.manifest().manifest.payload(), auth.payload(), endorsement.payload()]
    schemas = [b'"schema":"jetfleet/manifest/1"', b'"jetfleet/rollback/1"', b"key-endorsement"]
    for payload, schema in zip(payloads, schemas, strict=True):
        assert schema in payload


def test_naive_datetimes_and_foreign_fields_are_refused() -> None:
    data = KEY.manifest().manifest.model_dump(mode="json", by_alias=True)
    with pytest.raises(ValidationError):
        Manifest.model_validate({**data, "expires": "2026-01-01T00:00:00"})
    with pytest.raises(ValidationError):
        Manifest.model_validate({**data, "note": "trust me"})
    with pytest.raises(ValidationError):
        RollbackAuthorization.model_validate(
            {**KEY.rollback().model_dump(mode="json", by_alias=True), "device_id": "../x"}
        )


def test_key_ids_name_one_key_and_bad_base64_reads_as_none() -> None:
    assert key_id_of(KEY.raw_public) == KEY.key_id
    assert len(KEY.key_id) == 16
    assert key_id_of(new_key().raw_public) != KEY.key_id
    assert b64decode("not base64!") is None
    assert b64decode(KEY.public) == KEY.raw_public


def test_a_desired_document_without_signatures_still_decodes() -> None:
    doc = DesiredState(device_id="gw-1", generation=0, issued_at=datetime.now(timezone.utc))
    assert decode(DesiredState, encode(doc)).fleet_keys == ()
