"""Free TCP ports on 127.0.0.1 for servers started as child processes (demo, benches, tests).

The port is not an ephemeral one. A port the OS hands out by ``bind(("127.0.0.1", 0))`` and that
is then let go, so that a child can bind it, can meanwhile be taken as the *source* port of any
outgoing connection on the machine (a database or MQTT client), and the child then fails with
"Address already in use". Ports below the ephemeral range (``ip_local_port_range``) are never
taken that way; a port is handed out only when nothing listens on it, starting from a random
place so that two programs picking at once rarely meet.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 10000
"""Ports below this are left to services (databases, brokers, registries)."""

_handed_out: set[int] = set()
_first = random.randrange(1 << 16)  # noqa: S311 (a place to start, not a secret)


def ephemeral_start() -> int:
    """The first port of Linux's ephemeral range (32768 where it cannot be read)."""
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii")
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def local_ports() -> range:
    """The ports :func:`free_port` picks from: [LOWEST, the ephemeral range)."""
    return range(LOWEST, max(LOWEST, ephemeral_start()))


def free_port(choices: range | None = None) -> int:
    """A port in ``choices`` (default :func:`local_ports`) that nothing listens on and this
    process has not handed out before (until all of them were); the OS's choice when none is."""
    ports = local_ports() if choices is None else choices
    if ports and _handed_out.issuperset(ports):
        _handed_out.difference_update(ports)  # every one handed out once: start over
    for i in range(len(ports)):
        port = ports[(_first + i) % len(ports)]
        if port in _handed_out:
            continue
        _handed_out.add(port)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
