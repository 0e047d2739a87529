"""Log record formatting shared by the agent and the controller: JSON lines and a TTY form.

Pure formatting (no handlers, no I/O), so ``shared`` stays free of side effects. JSON lines
suit journald and log shippers: one object per line with ``ts``, ``level``, ``logger``,
``msg``, the exception text when there is one, and any ``extra={...}`` fields the caller
attached. The readable form is for a person at a terminal.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, Literal, TextIO

_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)

REDACTED = "***"

_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^@\s/]+(?=@)")
_SECRET_PARAM = re.compile(
    r"(?P<head>\b(?:token|access_token|password|passwd|secret|api_key|apikey)=)[^&\s\"']+",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<head>\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with passwords in URLs, ``token=``/``password=`` values and bearer tokens masked."""
    for pattern in (_URL_PASSWORD, _SECRET_PARAM, _BEARER):
        text = pattern.sub(lambda m: m["head"] + REDACTED, text)
    return text


class RedactingFilter(logging.Filter):
    """Masks secrets in a record's message, string ``extra`` fields and traceback text.

    Attach it to a handler: it rewrites the record in place before any formatter sees it and
    never drops a record.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact in place; always keep the record."""
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        for key, value in extra_fields(record).items():
            if isinstance(value, str):
                setattr(record, key, redact(value))
        if record.exc_info:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a caller attached with ``extra={...}``."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS}


class JsonFormatter(logging.Formatter):
    """One JSON object per line; non-JSON extra values are written as their ``str``."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a single line of JSON (newlines inside values are escaped)."""
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc"] = record.exc_text
        for key, value in extra_fields(record).items():
            entry.setdefault(key, value)
        return json.dumps(entry, default=str, ensure_ascii=False)


class ReadableFormatter(logging.Formatter):
    """``HH:MM:SS LEVEL logger: message key=value``, for a person at a terminal."""

    def __init__(self) -> None:
        super().__init__(
            fmt="%(asctime)s %(levelname)-7s %(name)s: %(message)s", datefmt="%H:%M:%S"
        )

    def format(self, record: logging.LogRecord) -> str:
        """The standard line plus the ``extra`` fields as ``key=value``."""
        line = super().format(record)
        extras = extra_fields(record)
        if not extras:
            return line
        head, sep, tail = line.partition("\n")
        pairs = " ".join(f"{k}={v}" for k, v in extras.items())
        return f"{head} {pairs}{sep}{tail}"


LogFormat = Literal["auto", "json", "text"]


def choose_formatter(stream: TextIO, fmt: LogFormat = "auto") -> logging.Formatter:
    """JSON unless ``stream`` is a TTY; ``fmt`` forces one or the other."""
    if fmt == "json" or (fmt == "auto" and not stream.isatty()):
        return JsonFormatter()
    return ReadableFormatter()


def configure_root_logging(
    level: str, stream: TextIO, fmt: LogFormat, quiet: Sequence[str]
) -> logging.Handler:
    """Make one redacting handler on ``stream`` the root logger's only handler.

    ``quiet`` names chatty libraries kept at WARNING unless the program logs at a higher level.
    Both programs call this through their own ``logging_setup`` with their own ``quiet`` list.
    """
    handler = logging.StreamHandler(stream)
    handler.setFormatter(choose_formatter(stream, fmt))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in quiet:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    return handler
