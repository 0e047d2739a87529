"""Configure the controller's logging: JSON lines for journald, readable lines on a terminal.

Call :func:`configure_logging` once at start with the operator's level (``info`` by default).
Whether stderr is a TTY decides the format (systemd connects stderr to the journal, never to a
TTY). Every record passes :class:`~shared.logfmt.RedactingFilter`, so passwords in URLs and
tokens never reach it.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

from shared.logfmt import JsonFormatter, ReadableFormatter, RedactingFilter

Format = Literal["auto", "json", "text"]

QUIET_LOGGERS = ("amqtt", "transitions", "alembic", "uvicorn.access")
"""Chatty libraries kept at WARNING unless the controller itself logs at a higher level."""


def choose_formatter(stream: TextIO, fmt: Format = "auto") -> logging.Formatter:
    """JSON unless ``stream`` is a TTY; ``fmt`` forces one or the other."""
    if fmt == "json" or (fmt == "auto" and not stream.isatty()):
        return JsonFormatter()
    return ReadableFormatter()


def configure_logging(
    level: str = "info", stream: TextIO | None = None, fmt: Format = "auto"
) -> logging.Handler:
    """Make one redacting handler on ``stream`` (stderr) the root logger's only handler."""
    out = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(out)
    handler.setFormatter(choose_formatter(out, fmt))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    return handler
