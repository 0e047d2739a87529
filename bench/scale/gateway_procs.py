"""Processes of simulated gateways (:class:`bench.scale.gateways.Fleet`), asked over a pipe."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import resource
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from bench.scale.gateways import Credential, Fleet, FleetSpec


def raise_open_files() -> None:
    """Soft limit of open files up to the hard one (a process here holds thousands of sockets)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def gateway_main(spec: FleetSpec, creds: list[Credential], conn: Connection) -> None:
    """A gateway process: run the gateways until told to stop."""
    raise_open_files()
    asyncio.run(Fleet(spec, creds).serve(conn))


class GatewayProcess:
    """One process of simulated gateways, asked over a pipe."""

    def __init__(self, index: int, spec: FleetSpec, creds: list[Credential]) -> None:
        self.index = index
        self.devices = [c.device_id for c in creds]
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self.process: BaseProcess = ctx.Process(
            target=gateway_main,
            args=(spec, creds, child),
            name=f"scale-gateways-{index}",
            daemon=True,
        )

    def start(self) -> GatewayProcess:
        self.process.start()
        return self

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process.is_alive() else None

    def ask(self, command: str, timeout: float = 60.0) -> Any:
        self._conn.send(command)
        if not self._conn.poll(timeout):
            raise TimeoutError(f"gateway process {self.index} did not answer {command!r}")
        answer = self._conn.recv()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def stop(self, timeout: float = 30.0) -> None:
        if self.process.is_alive():
            with contextlib.suppress(OSError, TimeoutError, EOFError):
                self.ask("stop", timeout)
            self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(10)
