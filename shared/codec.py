"""Encode and decode wire messages; a bad payload becomes one :class:`MessageError`."""

from __future__ import annotations

import json
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from shared.messages import DesiredState, Event, ReportedState, Status, Telemetry
from shared.topics import Channel

M = TypeVar("M", bound=BaseModel)

MESSAGE_TYPES: dict[Channel, type[BaseModel]] = {
    Channel.DESIRED: DesiredState,
    Channel.REPORTED: ReportedState,
    Channel.TELEMETRY: Telemetry,
    Channel.EVENTS: Event,
    Channel.STATUS: Status,
}
"""The payload model of each channel."""


class MessageError(ValueError):
    """A payload that does not validate. ``field`` names the first offending field."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def encode(message: BaseModel) -> bytes:
    """JSON bytes of a wire message (aliases, so ``schema`` is spelled as on the wire)."""
    return message.model_dump_json(by_alias=True).encode("utf-8")


def decode(model: type[M], payload: bytes | str) -> M:
    """Validate ``payload`` as ``model``; raise :class:`MessageError` naming the field."""
    try:
        data = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MessageError("<payload>", f"not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise MessageError("<payload>", f"expected a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "<payload>"
        raise MessageError(field, first["msg"]) from exc


def decode_for(channel: Channel, payload: bytes | str) -> BaseModel:
    """Decode the payload of ``channel`` into its model."""
    return decode(MESSAGE_TYPES[channel], payload)
