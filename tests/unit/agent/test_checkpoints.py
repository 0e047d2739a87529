"""Named checkpoints: observers see each step; the crash tests' observer pauses as the hooks did."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from agent import checkpoints
from tests.agent_pause import UPDATE_MARKER
from tests.agent_pause.sitecustomize import SWAP_MARKER, install, pause_every_time, pause_once


def test_no_observer_by_default_and_observers_see_every_step(tmp_path: Path) -> None:
    assert checkpoints._observers == []
    checkpoints.reached("swap:begin", tmp_path)  # nothing observes: returns at once
    seen: list[tuple[str, Path]] = []
    stop = checkpoints.observe(lambda step, state: seen.append((step, state)))
    try:
        checkpoints.reached("swap:begin", tmp_path)
        checkpoints.reached("update:switch", tmp_path)
    finally:
        stop()
    checkpoints.reached("swap:loaded", tmp_path)
    assert seen == [("swap:begin", tmp_path), ("update:switch", tmp_path)]
    assert checkpoints._observers == []


def blocked(target: Callable[..., None], *args: object) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + 5
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_the_swap_pause_blocks_at_its_step_every_time(tmp_path: Path) -> None:
    pause_every_time("swap:loaded", "swap:begin", tmp_path)  # another step: passes
    assert not (tmp_path / SWAP_MARKER).exists()
    for _ in range(2):
        thread = blocked(pause_every_time, "swap:loaded", "swap:loaded", tmp_path)
        wait_for(tmp_path / SWAP_MARKER)
        thread.join(0.2)
        assert thread.is_alive()
        assert (tmp_path / SWAP_MARKER).read_text() == "swap:loaded"
        (tmp_path / SWAP_MARKER).unlink()


def test_the_update_pause_blocks_the_first_time_only(tmp_path: Path) -> None:
    thread = blocked(pause_once, "update:switch", "update:switch", tmp_path)
    wait_for(tmp_path / UPDATE_MARKER)
    thread.join(0.2)
    assert thread.is_alive()
    assert (tmp_path / UPDATE_MARKER).read_text() == "update:switch"
    assert not (tmp_path / f".{UPDATE_MARKER}.tmp").exists()
    pause_once("update:switch", "update:switch", tmp_path)  # the restarted agent passes


def test_install_registers_only_what_the_environment_asks_for(tmp_path: Path) -> None:
    assert install({}) == []
    stops = install({"JETFLEET_TEST_PAUSE_AT": "swap:drained"})
    try:
        assert len(checkpoints._observers) == 1
        checkpoints.reached("swap:begin", tmp_path)  # not the step: passes
    finally:
        for stop in stops:
            stop()
    assert checkpoints._observers == []
