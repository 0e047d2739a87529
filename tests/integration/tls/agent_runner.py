"""The real agent daemon in a thread of the test process, and polling with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from tests.agent_runner import RunningAgent

__all__ = ["RunningAgent", "poll"]

T = TypeVar("T")


def poll(check: Callable[[], T | None], what: str, timeout_s: float = 30.0) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)
