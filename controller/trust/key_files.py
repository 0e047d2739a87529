"""The private halves of the fleet's ed25519 signing keys: the only controller module that
imports cryptography.

Each private key lives in ``<data dir>/keys/<key id>.key`` (PKCS#8 PEM, mode 0600, directory
0700), written once with ``O_EXCL`` and fsynced with its directory; the public halves, their
retirement and rotation endorsements are in the ``signing_keys`` table
(:class:`controller.db.signing_store.SigningStore`). A key file read back is checked against
the public key the database holds, so a replaced file signs nothing.

Concurrency: the cache of loaded keys is shared by every thread that signs (API threads, the
rollout and re-signing threads); one lock guards it, never held while a file is read.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.db.signing_store import KeyRecord
from controller.errors import ControllerError
from shared.manifests import b64decode, b64encode, key_id_of

KEYS_DIR = "keys"


class SigningError(ControllerError):
    """The fleet has no usable signing key (none created, or its private key file is missing)."""


class KeyFiles:
    """Creates private key files in ``<data dir>/keys`` and signs with the keys they hold."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / KEYS_DIR
        self._private: dict[str, Ed25519PrivateKey] = {}
        self._lock = threading.Lock()

    def path(self, key_id: str) -> Path:
        """Where the private half of ``key_id`` lives."""
        return self.directory / f"{key_id}.key"

    def create(self) -> tuple[str, str]:
        """A new key pair, its private half written: (key id, public key in base64)."""
        private = Ed25519PrivateKey.generate()
        raw_public = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        key_id = key_id_of(raw_public)
        pem = private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.directory, 0o700)
            fd = os.open(self.path(key_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(pem)
                f.flush()
                os.fsync(f.fileno())
            dir_fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise SigningError(
                f"cannot write the signing key to {self.path(key_id)}: {exc.strerror}; "
                "check the permissions of the data directory (--data-dir)"
            ) from exc
        with self._lock:
            self._private[key_id] = private
        return key_id, b64encode(raw_public)

    def require(self, key: KeyRecord) -> None:
        """SigningError unless the private half of ``key`` is here (and is that key's)."""
        self._private_key(key)

    def sign(self, key: KeyRecord, payload: bytes) -> str:
        """``payload`` signed by the private half of ``key``, in base64."""
        return b64encode(self._private_key(key).sign(payload))

    def _private_key(self, key: KeyRecord) -> Ed25519PrivateKey:
        with self._lock:
            cached = self._private.get(key.key_id)
        if cached is not None:
            return cached
        path = self.path(key.key_id)
        try:
            loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except FileNotFoundError as exc:
            raise SigningError(
                f"the private key of the active signing key {key.key_id} is not at {path}: copy "
                "it from the controller that created it, or rotate from one that has it"
            ) from exc
        except (OSError, ValueError, TypeError) as exc:
            raise SigningError(f"cannot read the signing key file {path}: {exc}") from exc
        if not isinstance(loaded, Ed25519PrivateKey):
            raise SigningError(f"{path} is not an ed25519 private key")
        raw_public = loaded.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        if b64decode(key.public_key) != raw_public:
            raise SigningError(
                f"{path} does not hold the private half of signing key {key.key_id}: "
                "the file was replaced; restore the original"
            )
        with self._lock:
            self._private[key.key_id] = loaded
        return loaded
