"""Names that arrive from the network and may become file names, checked before any path is built.

Artifacts and engines are stored under their sha256 or engine key (64 lower-case hex digits);
model names and versions follow the wire patterns of :mod:`shared.messages`. Every check here
matches the *whole* string (``re.fullmatch``): ``re.match`` with a ``$`` anchor would let a
trailing newline through. Anything else (``../`` forms, absolute paths, NUL bytes, separators,
over-long names) is refused with :class:`InvalidName`, whose message quotes a shortened form of
the offending value and says what is expected. Pure: no file system access.
"""

from __future__ import annotations

import re

from shared.topics import DEVICE_ID_PATTERN
from shared.wire_model import MODEL_NAME_PATTERN, SHA256_PATTERN, VERSION_PATTERN

_SHA256 = re.compile(SHA256_PATTERN)
_MODEL_NAME = re.compile(MODEL_NAME_PATTERN)
_VERSION = re.compile(VERSION_PATTERN)
_DEVICE_ID = re.compile(DEVICE_ID_PATTERN)

MAX_COMPONENT_BYTES = 255
"""The longest file name most Linux file systems accept."""

_QUOTE_CHARS = 72


class InvalidName(ValueError):
    """A name that must not become (part of) a path; the message says which form is expected."""


def quoted(value: str) -> str:
    """``repr`` of ``value``, shortened so an over-long name cannot flood a log line."""
    if len(value) <= _QUOTE_CHARS:
        return repr(value)
    return f"{value[:_QUOTE_CHARS]!r}... ({len(value)} characters)"


def _check(pattern: re.Pattern[str], value: str, what: str, expected: str) -> str:
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        raise InvalidName(f"invalid {what} {quoted(str(value))}: expected {expected}")
    return value


def is_sha256(value: str) -> bool:
    """True for exactly 64 lower-case hex digits."""
    return isinstance(value, str) and _SHA256.fullmatch(value) is not None


def check_sha256(value: str, what: str = "sha256") -> str:
    """``value`` when it is 64 lower-case hex digits, else :class:`InvalidName`."""
    return _check(_SHA256, value, what, "64 lower-case hex digits")


def check_engine_key(value: str) -> str:
    """An engine key (:func:`shared.engine_keys.engine_key`): 64 lower-case hex digits."""
    return check_sha256(value, "engine key")


def check_model_name(value: str) -> str:
    """A model name: 1-64 of a-z 0-9 . _ - starting with a-z or 0-9."""
    return _check(
        _MODEL_NAME, value, "model name", "1-64 of a-z 0-9 . _ - starting with a-z or 0-9"
    )


def check_version(value: str) -> str:
    """A model version: 1-64 of A-Z a-z 0-9 . + _ - starting with a letter or digit."""
    return _check(
        _VERSION, value, "version", "1-64 of A-Z a-z 0-9 . + _ - starting with a letter or digit"
    )


def check_device_id(value: str) -> str:
    """A device id (one MQTT topic level): 1-64 of A-Z a-z 0-9 . _ - starting alphanumeric."""
    return _check(
        _DEVICE_ID, value, "device id", "1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit"
    )


def check_file_name(value: str) -> str:
    """One path component safe to join under a directory: no separator, NUL, control
    character, ``.``/``..``, and at most 255 bytes in UTF-8."""
    bad = (
        not isinstance(value, str)
        or value in ("", ".", "..")
        or any(c in "/\\" or ord(c) < 32 or ord(c) == 127 for c in value)
        or len(value.encode("utf-8", "surrogatepass")) > MAX_COMPONENT_BYTES
    )
    if bad:
        raise InvalidName(
            f"invalid file name {quoted(str(value))}: expected one path component of at most "
            f"{MAX_COMPONENT_BYTES} bytes without '/', '\\', NUL or control characters"
        )
    return value
