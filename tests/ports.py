"""Ports for servers the tests start in child processes: each pytest-xdist worker picks from a
slice of its own below the ephemeral range, so two workers of one run never pick the same one
(:mod:`controller.demo.ports` says why not an ephemeral port)."""

from __future__ import annotations

import os

from controller.demo.ports import LOWEST, ephemeral_start
from controller.demo.ports import free_port as _free_port

PORTS_PER_WORKER = 600


def worker_ports() -> range:
    """This worker's slice of [LOWEST, ephemeral start); empty when the range cannot hold it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() else 0
    start = LOWEST + index * PORTS_PER_WORKER
    return range(start, max(start, min(start + PORTS_PER_WORKER, ephemeral_start())))


def free_port() -> int:
    """A port of this worker's slice that nothing listens on."""
    return _free_port(worker_ports())
