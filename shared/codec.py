"""Encode and decode wire messages; a bad payload becomes one :class:`MessageError`.

Every JSON the system reads from the network goes through :func:`load_json`: orjson parses it
(it refuses more than 1,024 levels itself) and no document nests deeper than ``max_depth``
levels, so no decoder, validator or ``repr`` down the line can run out of stack on it.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from shared.messages import DesiredState, Event, ReportedState, Status
from shared.telemetry import Telemetry
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

MAX_JSON_DEPTH = 64
"""Levels of arrays/objects a wire message or request body may nest (the deepest real one, a
rank-8 KServe ``data`` list inside its request, has 11)."""

_CONTAINERS = (list, dict)


class JSONError(ValueError):
    """A document that is not JSON, or nests deeper than allowed; the message says which."""


def _too_deep(doc: Any, max_depth: int) -> bool:
    """Whether ``doc`` nests deeper than ``max_depth``; iterative, scanning each container's
    items in C (``map(type, ...)``) and walking only the containers among them."""
    stack = [(doc, 1)] if type(doc) in _CONTAINERS else []
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return True
        items = node.values() if type(node) is dict else node
        kinds = set(map(type, items))
        if list in kinds or dict in kinds:
            stack.extend((item, depth + 1) for item in items if type(item) in _CONTAINERS)
    return False


def load_json(raw: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The parsed document; :class:`JSONError` for text that is not JSON or nests too deep.

    Bare ``NaN``/``Infinity`` tokens (not JSON, but what Python's ``json`` writes) are still
    read, through the standard library, as before; only such documents pay its cost.
    """
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc):
            raise JSONError(f"nests deeper than {max_depth} levels") from exc
        try:
            doc = json.loads(raw)
        except RecursionError:
            raise JSONError(f"nests deeper than {max_depth} levels") from exc
        except ValueError:  # UnicodeDecodeError and JSONDecodeError included
            raise JSONError(f"not JSON ({exc})") from exc
    if _too_deep(doc, max_depth):
        raise JSONError(f"nests deeper than {max_depth} levels")
    return doc


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
        data = load_json(payload)
    except JSONError as exc:
        raise MessageError("<payload>", str(exc)) from exc
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
