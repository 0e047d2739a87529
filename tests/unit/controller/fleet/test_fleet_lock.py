"""The fleet lock serves a waiting deploy (foreground) before the next chunk of a fleet-wide
republish (background): with a plain lock the republishing thread took it again first, and a
deploy went out after the whole fleet (a CI run of test_republish_in_chunks saw it)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from controller.fleet.fleet_lock import FleetLock


def wait_until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, "the other thread never got there"
        time.sleep(0.001)


def test_a_waiting_foreground_caller_goes_before_a_background_one() -> None:
    lock = FleetLock()
    order: list[str] = []
    background_waiting = threading.Event()

    def foreground() -> None:
        with lock:
            order.append("deploy")

    def background() -> None:
        background_waiting.set()
        with lock.background():
            order.append("next chunk")

    with lock.background():  # a chunk being published
        deploy = threading.Thread(target=foreground)
        deploy.start()
        wait_until(lambda: lock._foreground_waiting == 1)
        chunk = threading.Thread(target=background)
        chunk.start()
        background_waiting.wait(10)
        time.sleep(0.05)  # let the next chunk reach its wait (order is asserted, not time)
    deploy.join(10)
    chunk.join(10)
    assert order == ["deploy", "next chunk"]


def test_the_lock_excludes_and_is_released_on_errors() -> None:
    lock = FleetLock()
    inside = 0
    most = 0

    def work() -> None:
        nonlocal inside, most
        for _ in range(200):
            with lock:
                inside += 1
                most = max(most, inside)
                inside -= 1
            with lock.background():
                inside += 1
                most = max(most, inside)
                inside -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert most == 1
    try:
        with lock:
            raise ValueError("a failed deploy")
    except ValueError:
        pass
    with lock.background():  # released despite the error: no deadlock
        pass
