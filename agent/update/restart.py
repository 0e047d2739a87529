"""Restart into another release without giving up the PID or the KServe port.

The agent re-executes the launcher (``os.execv``): the PID stays the unit's main process, so
systemd's ``Type=notify`` bookkeeping and ``WatchdogSec=`` stay valid (``WATCHDOG_USEC`` and
``NOTIFY_SOCKET`` are in the environment the new program inherits). Before it stops serving,
the agent duplicates its listening socket as an inheritable descriptor and names it in
``$JETFLEET_SERVE_FD``; the new agent serves that socket (:mod:`agent.serving.http_server`).
The kernel keeps queueing connections on it between the old server closing its copy and the
new one accepting, so clients see a pause, not a refused connection.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from typing import NoReturn

from agent.serving.http_server import SERVE_FD_ENV

log = logging.getLogger(__name__)

HANDOVER_FD = 3
"""The descriptor the launcher gets the listening socket on. It must be a single digit: the
launcher is a POSIX sh script, and dash (/bin/sh on Debian, Ubuntu and JetPack) names only
descriptors 0-9 in a redirection, which its watchdog needs to close its copy of the socket."""


def keep_listening(sock: socket.socket | None) -> None:
    """Duplicate the listening socket for the next program (before the server closes it)."""
    if sock is None:
        return
    fd = os.dup(sock.fileno())
    os.set_inheritable(fd, True)
    os.environ[SERVE_FD_ENV] = str(fd)


def exec_launcher(launcher: str, args: list[str]) -> NoReturn:
    """Replace this process with ``launcher ARGS`` (the same PID)."""
    log.info("restarting through %s %s", launcher, " ".join(args))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    _hand_over_low()
    os.execv(launcher, [launcher, *args])  # noqa: S606 (the launcher is a fixed root-owned path)


def _hand_over_low() -> None:
    """Move the handed-over socket to :data:`HANDOVER_FD` when it is above 9. Done just before
    ``execv``: what held that descriptor is not inheritable and would be closed by it anyway."""
    raw = os.environ.get(SERVE_FD_ENV, "")
    if not raw.isdigit() or int(raw) <= 9:
        return
    fd = int(raw)
    os.dup2(fd, HANDOVER_FD, inheritable=True)
    os.set_inheritable(fd, False)  # closed by execv: the launcher gets one copy
    os.environ[SERVE_FD_ENV] = str(HANDOVER_FD)
