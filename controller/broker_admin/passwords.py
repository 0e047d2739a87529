"""Broker passwords: random secrets and their PBKDF2-SHA512 hashes in Mosquitto's format.

Mosquitto 2.0's dynamic security plugin keeps ``password`` (base64 of the 64-byte
PBKDF2-HMAC-SHA512 output), ``salt`` (base64 of the raw salt) and ``iterations``; the embedded
broker stores the same three parts in one string, ``pbkdf2-sha512$<iterations>$<salt>$<hash>``.
Passwords are 256-bit random secrets, so the iteration count guards against nothing a password
guess could win; it is kept moderate because every broker connection pays it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

ITERATIONS = 10_000
_SCHEME = "pbkdf2-sha512"


def new_password() -> str:
    """A fresh random broker password (43 URL-safe characters, 256 bits)."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class PasswordHash:
    """The three parts Mosquitto's dynamic security plugin stores for a client."""

    password: str
    """base64 of PBKDF2-HMAC-SHA512(password, salt, iterations)."""
    salt: str
    """base64 of the raw salt."""
    iterations: int

    def encode(self) -> str:
        """One string for a database column."""
        return f"{_SCHEME}${self.iterations}${self.salt}${self.password}"

    @classmethod
    def decode(cls, text: str) -> PasswordHash:
        """Parse :meth:`encode`'s output; ValueError when it is not one."""
        scheme, iterations, salt, digest = text.split("$")
        if scheme != _SCHEME:
            raise ValueError(f"unknown password hash scheme {scheme!r}")
        return cls(password=digest, salt=salt, iterations=int(iterations))


def hash_password(password: str, iterations: int = ITERATIONS) -> PasswordHash:
    """Hash ``password`` with a new 12-byte salt (the size ``mosquitto_ctrl`` uses)."""
    salt = secrets.token_bytes(12)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode("utf-8"), salt, iterations)
    return PasswordHash(
        password=base64.b64encode(digest).decode("ascii"),
        salt=base64.b64encode(salt).decode("ascii"),
        iterations=iterations,
    )


def verify_password(password: str, stored: PasswordHash) -> bool:
    """True when ``password`` hashes to ``stored`` (constant-time comparison)."""
    try:
        salt = base64.b64decode(stored.salt, validate=True)
        expected = base64.b64decode(stored.password, validate=True)
    except ValueError:
        return False
    digest = hashlib.pbkdf2_hmac("sha512", password.encode("utf-8"), salt, stored.iterations)
    return hmac.compare_digest(digest, expected)
