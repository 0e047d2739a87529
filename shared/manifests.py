"""Signed artifact metadata: manifests, rollback authorisations, key endorsements.

The controller signs, the agent verifies; both sign and verify the canonical JSON bytes
(:func:`shared.canonical.canonical_json`) of the statement, whose ``schema`` field names its
kind, so a signature over one kind of statement can never pass for another. Keys are ed25519;
a key's id is the first 16 hex digits of the sha256 of its raw 32-byte public key, so an id
always names exactly one key.

- :class:`Manifest` says what an artifact is (kind, name, version, serial, sha256, size) and
  until when the statement holds; :class:`SignedManifest` adds the fleet key's signature.
- :class:`RollbackAuthorization` lets one device install an older ``serial`` of one model than
  the one it has, for one desired generation onwards (a replayed older authorisation is useless
  once a newer version was installed under a later generation).
- :class:`ArtifactRef` is where to fetch an artifact, its hash and size, and its signed manifest.
- :class:`KeyEndorsement` is a key rotation: the new public key, signed by the previous key.
- :class:`DocumentSignature` signs a whole desired document (:func:`document_payload`), so who
  can publish on a device's ``desired`` topic cannot freeze, undeploy or re-configure it.

Signatures and keys travel as standard base64. This module is pure: cryptography lives in the
two adapters (``controller.trust.signing`` signs, ``agent.trust.signatures`` verifies).
"""

from __future__ import annotations

import base64
import binascii
from typing import Final, Literal

from pydantic import AwareDatetime, BaseModel, Field

from shared.canonical import canonical_json, sha256_hex
from shared.topics import DEVICE_ID_PATTERN
from shared.wire_model import MODEL_NAME_PATTERN, SHA256_PATTERN, VERSION_PATTERN, WireModel

SCHEMA_MANIFEST: Final = "jetfleet/manifest/1"
SCHEMA_ROLLBACK: Final = "jetfleet/rollback/1"
SCHEMA_ENDORSEMENT: Final = "jetfleet/key-endorsement/1"
DOCUMENT_SIGNATURE_FIELD: Final = "signature"
"""The top-level field of a signed document that holds its :class:`DocumentSignature`."""

KEY_ID_PATTERN = r"^[0-9a-f]{16}$"
B64_PATTERN = r"^[A-Za-z0-9+/]+={0,2}$"

ENGINE_VERSION: Final = "1"
"""The version every engine manifest carries: an engine key names one engine, never several."""

ArtifactKind = Literal["model", "engine", "agent"]


class Manifest(WireModel):
    """What an artifact is, signed by the fleet key ``key_id`` for ``created``..``expires``."""

    schema_: Literal["jetfleet/manifest/1"] = Field(default=SCHEMA_MANIFEST, alias="schema")
    kind: ArtifactKind
    name: str = Field(pattern=MODEL_NAME_PATTERN, description="Model name, or the engine key.")
    version: str = Field(pattern=VERSION_PATTERN, description="Model version (engines: '1').")
    serial: int = Field(
        ge=0,
        description="Monotonic per model (the version's row id on the controller); engines: 0.",
    )
    sha256: str = Field(pattern=SHA256_PATTERN)
    size: int = Field(ge=0)
    created: AwareDatetime
    expires: AwareDatetime
    key_id: str = Field(pattern=KEY_ID_PATTERN, description="The fleet key that signed it.")

    def payload(self) -> bytes:
        """The bytes the signature covers."""
        return canonical_json(self)


class SignedManifest(WireModel):
    """A manifest and the base64 ed25519 signature over its canonical JSON."""

    manifest: Manifest
    signature: str = Field(pattern=B64_PATTERN, max_length=128)


class ArtifactRef(WireModel):
    """Where to fetch an artifact's bytes and how to recognise them (a model slot's, a job's)."""

    url: str = Field(description="HTTP(S) URL of the artifact (supports Range).")
    sha256: str = Field(pattern=SHA256_PATTERN, description="sha256 of the bytes, lower-case hex.")
    size: int = Field(ge=0, description="Size in bytes.")
    signed: SignedManifest | None = Field(
        default=None,
        description="The artifact's manifest signed with the fleet key (shared.manifests); an "
        "agent with a pinned fleet key refuses the artifact without a valid one.",
    )


class RollbackAuthorization(WireModel):
    """Device ``device_id`` may install ``model`` ``version`` (``serial``) although it has a
    newer one, if that newer one was installed under a desired generation before ``generation``.
    """

    schema_: Literal["jetfleet/rollback/1"] = Field(default=SCHEMA_ROLLBACK, alias="schema")
    device_id: str = Field(pattern=DEVICE_ID_PATTERN)
    model: str = Field(pattern=MODEL_NAME_PATTERN)
    version: str = Field(pattern=VERSION_PATTERN)
    serial: int = Field(ge=0)
    generation: int = Field(ge=0, description="Desired generation the controller issued it for.")
    expires: AwareDatetime
    key_id: str = Field(pattern=KEY_ID_PATTERN)
    signature: str = Field(default="", pattern=r"^([A-Za-z0-9+/]+={0,2})?$", max_length=128)

    def payload(self) -> bytes:
        """The bytes the signature covers (every field but the signature)."""
        return canonical_json(self.model_dump(mode="json", by_alias=True, exclude={"signature"}))


class KeyEndorsement(WireModel):
    """Key rotation: fleet key ``key_id`` (``public_key``) replaces ``endorsed_by``, which signs."""

    schema_: Literal["jetfleet/key-endorsement/1"] = Field(
        default=SCHEMA_ENDORSEMENT, alias="schema"
    )
    key_id: str = Field(pattern=KEY_ID_PATTERN)
    public_key: str = Field(pattern=B64_PATTERN, max_length=64, description="Raw 32 bytes.")
    created: AwareDatetime
    endorsed_by: str = Field(pattern=KEY_ID_PATTERN, description="The key it replaces.")
    signature: str = Field(default="", pattern=r"^([A-Za-z0-9+/]+={0,2})?$", max_length=128)

    def payload(self) -> bytes:
        """The bytes the signature covers (every field but the signature)."""
        return canonical_json(self.model_dump(mode="json", by_alias=True, exclude={"signature"}))


class DocumentSignature(WireModel):
    """The fleet key ``key_id``'s signature over :func:`document_payload` of a document."""

    key_id: str = Field(pattern=KEY_ID_PATTERN)
    signature: str = Field(pattern=B64_PATTERN, max_length=128)


def document_payload(document: BaseModel) -> bytes:
    """The bytes a :class:`DocumentSignature` covers: the canonical JSON of ``document`` (JSON
    mode, wire aliases, fields left out of the wire form left out here too) without its
    ``signature`` field. The document's own ``schema`` field is part of it, so a document
    signature never passes for a manifest's or an endorsement's, nor the reverse.

    Signer and verifier both dump the model, so what is verified is exactly what the agent acts
    on; a field added later must be left out of the JSON at its default (``exclude_if``, as
    ``DesiredState.jobs`` is) so documents signed before it still verify.
    """
    data = document.model_dump(mode="json", by_alias=True)
    data.pop(DOCUMENT_SIGNATURE_FIELD, None)
    return canonical_json(data)


def key_id_of(public_key: bytes) -> str:
    """The id of a raw 32-byte ed25519 public key: 16 hex digits of its sha256."""
    return sha256_hex(public_key)[:16]


def b64encode(data: bytes) -> str:
    """Standard base64 text of ``data``."""
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes | None:
    """The bytes of standard base64 ``text``; None when it is not valid base64."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
