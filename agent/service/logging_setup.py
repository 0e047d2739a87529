"""Configure the agent's logging: JSON lines for journald, readable lines on a terminal.

Call :func:`configure_logging` once at start with the ``log_level`` setting. Whether stderr is a
TTY decides the format (systemd connects stderr to the journal, never to a TTY). Every record
passes :class:`~shared.logfmt.RedactingFilter`, so passwords in URLs and tokens never reach it.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from shared.logfmt import LogFormat, configure_root_logging

Format = LogFormat

QUIET_LOGGERS = ("httpx", "httpcore", "uvicorn.access")
"""Chatty libraries kept at WARNING unless the agent itself logs at a higher level."""


def configure_logging(
    level: str = "info", stream: TextIO | None = None, fmt: Format = "auto"
) -> logging.Handler:
    """Make one redacting handler on ``stream`` (stderr) the root logger's only handler."""
    return configure_root_logging(
        level, stream if stream is not None else sys.stderr, fmt, QUIET_LOGGERS
    )
