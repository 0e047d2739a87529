"""The agent's background threads under shared.supervision: a crash is survived or ends the agent.

Each test injects one failure into a thread's body and checks what an operator would notice:
telemetry samples keep arriving, systemd keeps getting watchdog pings, a build lease keeps
being renewed, and a KServe server whose loop died ends the process (status 70) so that systemd
starts it again instead of leaving a gateway that reports but serves nothing.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from agent.engines.lease_keeper import LeaseKeeper
from agent.link.outbox import Outbox
from agent.link.spool import SpoolEntry
from agent.service.sd_notify import Heartbeat, Notifier, Watchdog
from agent.serving.http_server import ServingServer
from agent.telemetry.collectors.health import HealthReadings
from agent.telemetry.loop import TelemetryLoop
from shared.codec import decode
from shared.supervision import EXIT_THREAD_DIED
from shared.telemetry import Telemetry
from tests.ports import free_port

REPO = Path(__file__).resolve().parents[3]


def wait_for(check: Callable[[], bool], what: str, deadline_s: float = 30.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


class FlakySampler:
    """A health sampler whose first ``collect`` raises (a collector bug), then reads nothing."""

    def __init__(self) -> None:
        self.calls = 0

    def collect(self) -> HealthReadings:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("collector bug")
        return HealthReadings()

    def close(self) -> None:
        return


@pytest.fixture
def published(tmp_path: Path) -> Iterator[tuple[Outbox, list[SpoolEntry]]]:
    """An outbox over a real spool whose publisher records what the broker would get."""
    sent: list[SpoolEntry] = []

    def publish(entry: SpoolEntry) -> bool:
        sent.append(entry)
        return True

    outbox = Outbox.open(tmp_path, 1 << 20, 3600.0, publish)
    outbox.start()
    yield outbox, sent
    outbox.close()


def test_telemetry_samples_keep_arriving_after_a_sample_raised(
    published: tuple[Outbox, list[SpoolEntry]], caplog: pytest.LogCaptureFixture
) -> None:
    outbox, sent = published
    sampler = FlakySampler()
    loop = TelemetryLoop("gw-a", "boot", sampler, outbox, interval_s=0.05)  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR):
        loop.start()
        try:
            wait_for(lambda: len(sent) >= 2, "two samples after the failed one")
        finally:
            loop.stop()
    ids = [decode(Telemetry, e.payload).sample_id for e in sent]
    assert ids[:2] == ["gw-a:boot:2", "gw-a:boot:3"]  # sample 1 is the one that raised
    assert any("background thread telemetry crashed" in r.getMessage() for r in caplog.records)


class NotifyListener:
    """The datagram socket systemd would bind for ``$NOTIFY_SOCKET``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(30)

    def next(self) -> bytes:
        return self.sock.recv(4096)


def test_watchdog_pings_resume_after_a_poll_raised(tmp_path: Path) -> None:
    listener = NotifyListener(tmp_path / "n")
    heartbeat = Heartbeat()
    ticking = threading.Event()

    def reconcile_loop() -> None:  # a live loop, beating as the agent's does every tick
        while not ticking.wait(0.01):
            heartbeat.beat()

    polls = [0]

    def last_tick() -> float | None:
        polls[0] += 1
        if polls[0] == 1:
            raise RuntimeError("heartbeat unreadable")
        return heartbeat.last()

    loop = threading.Thread(target=reconcile_loop, daemon=True)
    loop.start()
    watchdog = Watchdog(Notifier(str(listener.path)), 0.2, last_tick)
    watchdog.start()
    try:
        pings = [listener.next(), listener.next()]
    finally:
        watchdog.stop()
        ticking.set()
        loop.join(5)
        listener.sock.close()
    assert pings == [b"WATCHDOG=1", b"WATCHDOG=1"]
    assert polls[0] >= 3


class FlakyLeaseStore:
    """An engine store whose first lease renewal raises something no one expected."""

    def __init__(self) -> None:
        self.calls = 0
        self.renewals = 0
        self.renewed_twice = threading.Event()

    def lease(self, key: str, device_id: str, ttl_s: float, tuning: str = "default") -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("store client bug")
        self.renewals += 1
        if self.renewals >= 2:
            self.renewed_twice.set()


def test_a_build_lease_keeps_being_renewed_after_a_renewal_raised() -> None:
    store = FlakyLeaseStore()
    keeper = LeaseKeeper(store, "a" * 64, "default", "gw-a", 0.15)  # type: ignore[arg-type]
    try:
        assert store.renewed_twice.wait(30), "the lease was not renewed after the failure"
    finally:
        keeper.stop()


async def _ok(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


def test_a_stopped_kserve_server_is_not_a_fatal_end() -> None:
    fatal: list[str] = []
    server = ServingServer(
        Starlette(routes=[Route("/ok", _ok)]),
        "127.0.0.1",
        free_port(),
        on_fatal=lambda name, exc: fatal.append(name),
    )
    server.start()
    server.stop()
    assert fatal == []


CRASHING_SERVER = textwrap.dedent(
    """
    import asyncio, threading, urllib.request
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from agent.serving.http_server import ServingServer

    async def crash(request):
        asyncio.get_running_loop().stop()  # the server's event loop dies under it
        return PlainTextResponse("bye")

    server = ServingServer(Starlette(routes=[Route("/crash", crash)]), "127.0.0.1", 0)
    port = server.start()
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/crash", timeout=5)
    except Exception:
        pass
    threading.Event().wait(20)
    print("still running without a KServe server")
    """
)


def test_an_agent_whose_kserve_server_died_exits_for_systemd_to_restart_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_SERVER],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == EXIT_THREAD_DIED, done.stdout + done.stderr
    assert "background thread kserve died" in done.stderr
    assert "still running" not in done.stdout
