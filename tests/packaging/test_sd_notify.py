"""sd_notify over a real AF_UNIX datagram socket, and the watchdog's stuck-loop decision."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.service.sd_notify import Heartbeat, Notifier, Watchdog, loop_alive, watchdog_interval_s


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    yield path, sock
    sock.close()


def receive(sock: socket.socket) -> list[str]:
    return sock.recv(4096).decode().split("\n")


def test_ready_status_watchdog_stopping_arrive_as_datagrams(
    listener: tuple[str, socket.socket],
) -> None:
    path, sock = listener
    notifier = Notifier(path)
    assert notifier.ready("serving 2 models")
    assert receive(sock) == ["READY=1", "STATUS=serving 2 models"]
    assert notifier.status("downloading detector 1.0.0")
    assert receive(sock) == ["STATUS=downloading detector 1.0.0"]
    assert notifier.watchdog()
    assert receive(sock) == ["WATCHDOG=1"]
    assert notifier.stopping()
    assert receive(sock) == ["STOPPING=1"]


def test_abstract_namespace_address() -> None:
    name = f"jetfleet-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        assert Notifier("@" + name).ready()
        assert receive(sock) == ["READY=1"]


def test_without_notify_socket_every_call_is_a_quiet_no_op(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    notifier = Notifier()
    assert not notifier.enabled
    assert not notifier.ready()


def test_notify_socket_from_environment(
    listener: tuple[str, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, sock = listener
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    assert Notifier().status("starting")
    assert receive(sock) == ["STATUS=starting"]


def test_a_vanished_socket_reports_false_instead_of_crashing(tmp_path: Path) -> None:
    assert not Notifier(str(tmp_path / "gone")).watchdog()


def test_watchdog_interval_only_for_this_process() -> None:
    pid = os.getpid()
    assert watchdog_interval_s({"WATCHDOG_USEC": "60000000"}, pid) == 60.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(pid)}, pid) == 30
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, pid) is None
    assert watchdog_interval_s({}, pid) is None


def test_loop_alive_within_half_the_interval() -> None:
    assert loop_alive(now=100.0, last_tick=71.0, watchdog_s=60)
    assert not loop_alive(now=100.0, last_tick=69.0, watchdog_s=60)
    assert not loop_alive(now=100.0, last_tick=None, watchdog_s=60)


def test_watchdog_pings_while_the_loop_ticks_and_stops_when_it_is_stuck(
    listener: tuple[str, socket.socket],
) -> None:
    path, sock = listener
    now = [1000.0]
    heartbeat = Heartbeat(clock=lambda: now[0])
    watchdog = Watchdog(Notifier(path), 10.0, heartbeat.last, clock=lambda: now[0])
    assert not watchdog.poll()
    heartbeat.beat()
    now[0] += 4
    assert watchdog.poll()
    assert receive(sock) == ["WATCHDOG=1"]
    now[0] += 2
    assert not watchdog.poll()
    sock.settimeout(0.2)
    with pytest.raises(TimeoutError):
        sock.recv(4096)


def test_watchdog_thread_pings_until_stopped(listener: tuple[str, socket.socket]) -> None:
    path, sock = listener
    heartbeat = Heartbeat()
    heartbeat.beat()
    watchdog = Watchdog(Notifier(path), 0.4, heartbeat.last)
    watchdog.start()
    try:
        deadline = time.monotonic() + 5
        pings = 0
        while pings < 2 and time.monotonic() < deadline:
            heartbeat.beat()
            if receive(sock) == ["WATCHDOG=1"]:
                pings += 1
        assert pings == 2
    finally:
        watchdog.stop()
