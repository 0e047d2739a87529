"""One log line per outage for a loop that fails every tick (a database restarting).

The rollout loop ticks four times a second and the job loop once a second; while PostgreSQL
restarted for 15 s they wrote 60 and 8 identical ERROR lines (the soak bench). A
:class:`FailureLog` writes the first failure at ERROR, then at most one WARNING per
``every_s`` with how many ticks failed since, and one INFO line when a tick succeeds again,
saying how long the failures lasted. Pure apart from the logger and the injected clock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

EVERY_S = 60.0


class FailureLog:
    """``failed(what)`` after each failed tick, ``succeeded()`` after each good one; not
    thread-safe (one loop, one thread)."""

    def __init__(
        self,
        logger: logging.Logger,
        name: str,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._name = name
        self._every = every_s
        self._clock = clock
        self._since: float | None = None
        self._logged_at = 0.0
        self._failures = 0
        self._held_back = 0

    @property
    def failing(self) -> bool:
        return self._since is not None

    def failed(self, what: object) -> None:
        now = self._clock()
        self._failures += 1
        if self._since is None:
            self._since, self._logged_at, self._held_back = now, now, 0
            self._logger.error("%s: %s", self._name, what)
            return
        if now - self._logged_at < self._every:
            self._held_back += 1
            return
        self._logger.warning(
            "%s: still failing after %.0f s (%d more failure(s) since the last line): %s",
            self._name,
            now - self._since,
            self._held_back + 1,
            what,
        )
        self._logged_at, self._held_back = now, 0

    def succeeded(self) -> None:
        if self._since is None:
            return
        self._logger.info(
            "%s: working again after %.1f s (%d failure(s))",
            self._name,
            self._clock() - self._since,
            self._failures,
        )
        self._since, self._failures, self._held_back = None, 0, 0
