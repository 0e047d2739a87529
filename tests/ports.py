"""Free TCP ports on 127.0.0.1 for servers the tests start in child processes."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

PORTS_PER_WORKER = 600
"""Each pytest-xdist worker hands out ports from its own slice below the ephemeral range."""


def _ephemeral_start() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii")
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_slice() -> range:
    """The ports this worker may hand out: a slice of [10000, ephemeral start) per worker, or
    nothing when the ephemeral range starts too low to hold one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() else 0
    start = 10000 + index * PORTS_PER_WORKER
    stop = min(start + PORTS_PER_WORKER, _ephemeral_start())
    return range(start, max(start, stop))


_handed_out: set[int] = set()
_first = random.randrange(PORTS_PER_WORKER)
"""Where this process starts in its slice: another suite running on the same machine (a fresh
clone's ``make test`` beside a checkout's) then walks its slices from another place."""


def free_port() -> int:
    """A TCP port nobody listens on at 127.0.0.1, for a server a test starts in a child process.

    It is not an ephemeral port: a port the OS handed out by ``bind(0)`` and then let go can be
    taken as the *source* port of any outgoing connection (a PostgreSQL or MQTT client of another
    worker) before the child binds it, and the child fails with "Address already in use". Ports
    below the ephemeral range are never taken that way, and each xdist worker has its own slice,
    so two workers of one run never pick the same one."""
    ports = _port_slice()
    if ports and _handed_out.issuperset(ports):
        _handed_out.clear()  # every port handed out once: start over, skipping the busy ones
    turned: list[int] = (
        [*ports[_first % len(ports) :], *ports[: _first % len(ports)]] if ports else []
    )
    for port in turned:
        if port in _handed_out:
            continue
        _handed_out.add(port)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    with socket.socket() as s:  # the slice is used up or absent: the OS's choice
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
