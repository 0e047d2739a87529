"""The fleet's lock, on which foreground work goes before a background republish.

Every change to desired documents (deploy, undeploy, configs, rollout waves, jobs) holds the
fleet lock while it plans and publishes; a fleet-wide republish (a new leader, a reconnect,
re-signing) takes it one chunk of devices at a time so that the others wait for one chunk, not the
whole fleet (``Fleet.republish_all``). With a plain ``threading.Lock`` they did not: the
republishing thread released the lock and took it again for the next chunk before a waiting
deploy was scheduled, so the deploy often went out after the last chunk (CI saw it: the deploy
9th of 9 calls). Here a background holder (:meth:`FleetLock.background`) waits while any
foreground caller (``with lock:``) waits, and every release wakes the waiters.

Foreground callers are served in no particular order among themselves; a background caller can
wait as long as foreground work keeps arriving, which is the point. Not reentrant.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType


class FleetLock:
    """``with lock:`` (foreground) or ``with lock.background():`` (steps aside)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held = False
        self._foreground_waiting = 0

    def __enter__(self) -> FleetLock:
        with self._cond:
            self._foreground_waiting += 1
            try:
                while self._held:
                    self._cond.wait()
            finally:
                self._foreground_waiting -= 1
            self._held = True
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._release()

    @contextmanager
    def background(self) -> Iterator[None]:
        """Hold the lock once no one holds it and no foreground caller waits for it."""
        with self._cond:
            while self._held or self._foreground_waiting:
                self._cond.wait()
            self._held = True
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()
