"""The real agent daemon in a thread of the test process, and polling with a deadline."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from agent.daemon import AgentDaemon
from agent.facts import probe_facts
from agent.settings import AgentSettings

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


class RunningAgent:
    """The real agent daemon in a thread, stopped (and its failure re-raised) by the test."""

    def __init__(self, settings: AgentSettings) -> None:
        self.daemon = AgentDaemon(settings, probe_facts())
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.daemon.run()
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self.daemon.request_stop()
        self.thread.join(30)
        assert not self.thread.is_alive(), "agent did not stop"
        assert self.error is None, f"agent failed: {self.error!r}"
