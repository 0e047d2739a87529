"""The jobs thread: follow the job events devices send, every second, under supervision.

Every :data:`SYNC_S` it applies the job events stored since the last pass
(:meth:`JobService.sync`); every :data:`FULL_SCAN_S` it reads every job event of the devices
with unfinished jobs again, so an event stored out of order (a lower row id, committed late) is
not missed. A database error is logged and retried at the next pass. Any other exception used to
end the thread without a word: jobs stayed ``running`` in ``jetfleet jobs ls`` and kept riding
in their devices' documents. Now the thread runs under :class:`shared.supervision.Supervised`
(``restart``): the crash is logged with the thread's name and the loop runs again after a
back-off, starting with a full scan (what a crash interrupted is applied then).
"""

from __future__ import annotations

import logging
import threading
import time

from controller.errors import ControllerError
from controller.jobs.service import JobService
from shared.supervision import Supervised

logger = logging.getLogger(__name__)

SYNC_S = 1.0
"""How often the loop reads new job events."""
FULL_SCAN_S = 60.0
"""How often the loop reads every job event of the devices with unfinished jobs again."""


class JobLoop:
    """Calls :meth:`JobService.sync` every :data:`SYNC_S` on its own supervised thread."""

    def __init__(self, service: JobService, interval_s: float = SYNC_S) -> None:
        self._service = service
        self._interval = interval_s
        self._stop = threading.Event()
        self._guard = Supervised("jetfleet-jobs", self._run, policy="restart", stop=self._stop)

    @property
    def restarts(self) -> int:
        """How many times the thread was started again after a crash."""
        return self._guard.restarts

    def start(self) -> None:
        self._guard.start()

    def stop(self) -> None:
        self._stop.set()
        if self._guard.is_alive():
            self._guard.join(15)

    def _run(self) -> None:
        last_full = float("-inf")
        while not self._stop.wait(self._interval):
            now = time.monotonic()
            full = now - last_full >= FULL_SCAN_S
            try:
                self._service.sync(full=full)
                if full:
                    last_full = now
            except ControllerError as exc:
                logger.error("could not follow job events: %s", exc)
