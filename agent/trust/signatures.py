"""ed25519 signature verification: the only agent module that imports cryptography.

The agent only verifies; it never holds a private key. Malformed keys or signatures (wrong
length, not base64) verify as False, like a wrong signature: the caller refuses either way.
"""

from __future__ import annotations

from shared.manifests import b64decode


def verify(public_key_b64: str, payload: bytes, signature_b64: str) -> bool:
    """True when ``signature_b64`` is the ed25519 signature of ``payload`` by the key."""
    raw_key = b64decode(public_key_b64)
    signature = b64decode(signature_b64)
    if raw_key is None or signature is None or len(raw_key) != 32 or len(signature) != 64:
        return False
    # Imported on first use: an idle agent does not pay for cryptography's ~4 MB.
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(raw_key).verify(signature, payload)
    except (InvalidSignature, ValueError):
        return False
    return True
