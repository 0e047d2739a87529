"""Canonical JSON and sha256 helpers: one byte representation per value, so hashes agree."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel


def canonical_json(value: Any) -> bytes:
    """Serialise ``value`` as canonical JSON: sorted keys, no whitespace, UTF-8.

    A pydantic model is dumped in JSON mode first, so datetimes and enums have one spelling.
    Floats that are not finite are refused: they have no JSON spelling.
    """
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True)
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Lower-case hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``: a stable identity for configs and documents."""
    return sha256_hex(canonical_json(value))


def is_sha256_hex(text: str) -> bool:
    """True when ``text`` is 64 lower-case hex digits (the form every artifact id takes)."""
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)
