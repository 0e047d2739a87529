"""The base every wire message derives from, and the name, version and digest patterns they check.

Wire models refuse unknown fields and are immutable; :mod:`shared.messages`, :mod:`shared.facts`,
:mod:`shared.telemetry`, :mod:`shared.jobs` and :mod:`shared.manifests` build their payloads on it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

MODEL_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$"
SHA256_PATTERN = r"^[0-9a-f]{64}$"

DeviceId = str


class WireModel(BaseModel):
    """Base of every wire message: unknown fields are errors, instances are immutable."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True
    )
