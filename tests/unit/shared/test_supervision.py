"""The guard every long-lived background thread runs under (shared.supervision)."""

from __future__ import annotations

import logging
import threading

import pytest

from shared.supervision import Periodic, Supervised


def test_a_crashing_body_is_restarted_with_its_error_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs: list[int] = []
    done = threading.Event()

    def body() -> None:
        runs.append(1)
        if len(runs) < 3:
            raise RuntimeError(f"boom {len(runs)}")
        done.set()

    with caplog.at_level(logging.ERROR, logger="shared.supervision"):
        guard = Supervised("writer", body, policy="restart", first_backoff_s=0.01).start()
        assert done.wait(5)
        guard.join(5)
    assert len(runs) == 3
    assert guard.restarts == 2
    assert guard.last_error == "RuntimeError: boom 2"
    crashes = [r for r in caplog.records if "background thread writer crashed" in r.getMessage()]
    assert len(crashes) == 2
    # the traceback travels with the record (another handler may have rendered it to exc_text)
    first = crashes[0]
    assert first.exc_info is not None or "boom 1" in (first.exc_text or "")


def test_a_body_that_returns_is_not_restarted() -> None:
    runs: list[int] = []
    guard = Supervised("once", lambda: runs.append(1), policy="restart").start()
    guard.join(5)
    assert not guard.is_alive()
    assert runs == [1]
    assert guard.restarts == 0


def test_a_stop_during_the_backoff_ends_the_thread_without_a_restart() -> None:
    stop = threading.Event()
    runs: list[int] = []

    def body() -> None:
        runs.append(1)
        stop.set()
        raise RuntimeError("crashed while stopping")

    guard = Supervised("stopping", body, policy="restart", stop=stop, first_backoff_s=30).start()
    guard.join(5)
    assert not guard.is_alive()
    assert runs == [1]


def test_the_exit_policy_hands_the_crash_to_the_fatal_action() -> None:
    fatal: list[tuple[str, str]] = []

    def body() -> None:
        raise OSError("port gone")

    guard = Supervised(
        "http", body, policy="exit", on_fatal=lambda name, exc: fatal.append((name, str(exc)))
    ).start()
    guard.join(5)
    assert fatal == [("http", "port gone")]
    assert guard.restarts == 0


def test_the_backoff_doubles_up_to_its_cap() -> None:
    waits: list[float] = []

    class RecordingStop(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0.0)
            return len(waits) >= 5

    def body() -> None:
        raise ValueError("always")

    guard = Supervised(
        "loop", body, policy="restart", stop=RecordingStop(), first_backoff_s=1, max_backoff_s=4
    ).start()
    guard.join(5)
    assert waits == [1, 2, 4, 4, 4]


def test_a_periodic_tick_that_crashes_is_run_again_and_stop_ends_it() -> None:
    ticks: list[int] = []
    third = threading.Event()

    def tick() -> None:
        ticks.append(1)
        if len(ticks) == 1:
            raise RuntimeError("first tick fails")
        if len(ticks) >= 3:
            third.set()

    loop = Periodic("ticker", tick, 0.01, first_backoff_s=0.01)
    loop.start()
    assert third.wait(5)
    loop.stop()
    assert loop.restarts == 1
    assert not loop.is_alive()
