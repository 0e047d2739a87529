"""Real ed25519 keys for the signing tests (cryptography directly: tests are not adapters)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from shared.manifests import (
    KeyEndorsement,
    Manifest,
    RollbackAuthorization,
    SignedManifest,
    b64decode,
    b64encode,
    key_id_of,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
SHA_A = "a" * 64
SHA_B = "b" * 64


@dataclass(frozen=True)
class Key:
    private: Ed25519PrivateKey

    @property
    def raw_public(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )

    @property
    def public(self) -> str:
        return b64encode(self.raw_public)

    @property
    def key_id(self) -> str:
        return key_id_of(self.raw_public)

    def sign(self, payload: bytes) -> str:
        return b64encode(self.private.sign(payload))

    def manifest(
        self,
        name: str = "detector",
        version: str = "2",
        serial: int = 5,
        sha256: str = SHA_A,
        size: int = 100,
        kind: str = "model",
        expires: datetime | None = None,
    ) -> SignedManifest:
        manifest = Manifest(
            kind=kind,  # type: ignore[arg-type]
            name=name,
            version=version,
            serial=serial,
            sha256=sha256,
            size=size,
            created=NOW - timedelta(days=1),
            expires=expires or NOW + timedelta(days=29),
            key_id=self.key_id,
        )
        return SignedManifest(manifest=manifest, signature=self.sign(manifest.payload()))

    def rollback(
        self,
        device_id: str = "gw-1",
        model: str = "detector",
        version: str = "1",
        serial: int = 3,
        generation: int = 9,
        expires: datetime | None = None,
    ) -> RollbackAuthorization:
        unsigned = RollbackAuthorization(
            device_id=device_id,
            model=model,
            version=version,
            serial=serial,
            generation=generation,
            expires=expires or NOW + timedelta(days=30),
            key_id=self.key_id,
        )
        return unsigned.model_copy(update={"signature": self.sign(unsigned.payload())})

    def endorse(self, new: Key) -> KeyEndorsement:
        unsigned = KeyEndorsement(
            key_id=new.key_id, public_key=new.public, created=NOW, endorsed_by=self.key_id
        )
        return unsigned.model_copy(update={"signature": self.sign(unsigned.payload())})


def new_key() -> Key:
    return Key(Ed25519PrivateKey.generate())


def verify(public_key: str, payload: bytes, signature: str) -> bool:
    raw, sig = b64decode(public_key), b64decode(signature)
    if raw is None or sig is None:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(sig, payload)
    except (InvalidSignature, ValueError):
        return False
    return True
