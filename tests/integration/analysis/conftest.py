"""Helpers of the analysis integration tests: ``jetfleet serve`` as a real process, and the
child processes it runs for analyses and reference outputs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from controller.demo.fleet import Process, _spawn, wait_for
from tests.ports import free_port


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Process, str, Path]]:
    """``jetfleet serve`` as a process (SQLite and the embedded broker in ``tmp_path``): the
    process, its URL and its data directory; killed by pid after the test if still running."""
    data_dir = tmp_path / "data"
    url = f"http://127.0.0.1:{free_port()}"
    argv = [sys.executable, "-m", "controller", "serve", "--auto-migrate"]
    argv += ["--http", url.removeprefix("http://"), "--embedded-broker", "127.0.0.1:0"]
    argv += ["--data-dir", str(data_dir)]
    server = _spawn("controller", argv, tmp_path / "logs", {})
    try:
        wait_for(
            "the controller's /healthz",
            lambda: httpx.get(f"{url}/healthz", timeout=2).status_code == 200,
            60,
            [server],
        )
        yield server, url, data_dir
    finally:
        if server.popen.poll() is None:
            server.popen.kill()
            server.popen.wait(10)


def children_running(pid: int, module: str) -> list[psutil.Process]:
    """The child processes of process ``pid`` running ``python -m module``."""
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if module in child.cmdline():
                found.append(child)
        except psutil.Error:
            continue
    return found


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
