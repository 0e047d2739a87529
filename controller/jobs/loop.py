"""The jobs thread: follow the job events devices send, every second, under supervision.

Every :data:`SYNC_S` it applies the job events stored since the last pass
(:meth:`JobService.sync`); every :data:`FULL_SCAN_S` it reads every job event of the devices
with unfinished jobs again, so an event stored out of order (a lower row id, committed late) is
not missed. A database error is retried at the next pass and logged once per outage
(:class:`controller.failure_log.FailureLog`: the first at ERROR, a reminder a minute, one line when
it works again). Any other exception used to
end the thread without a word: jobs stayed ``running`` in ``jetfleet jobs ls`` and kept riding
in their devices' documents. Now the thread runs under :class:`shared.supervision.Supervised`
(``restart``): the crash is logged with the thread's name and the loop runs again after a
back-off, starting with a full scan (what a crash interrupted is applied then).

With several replicas only the one running the rollouts follows job events (``active``):
two replicas applying the same event would both write its outcome and republish the device's
document. A replica that becomes active starts with a full scan.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from controller.errors import ControllerError
from controller.failure_log import FailureLog
from controller.jobs.service import JobService
from shared.supervision import PeriodicService

logger = logging.getLogger(__name__)

SYNC_S = 1.0
"""How often the loop reads new job events."""
FULL_SCAN_S = 60.0
"""How often the loop reads every job event of the devices with unfinished jobs again."""


class JobLoop(PeriodicService):
    """Calls :meth:`JobService.sync` every :data:`SYNC_S` on its own supervised thread."""

    def __init__(
        self,
        service: JobService,
        interval_s: float = SYNC_S,
        *,
        active: Callable[[], bool] = lambda: True,
    ) -> None:
        self._service = service
        self._active = active
        self._last_full = float("-inf")
        self._failures = FailureLog(logger, "could not follow job events")
        super().__init__("jetfleet-jobs", interval_s)

    def _tick(self) -> None:
        if not self._active():
            self._last_full = float("-inf")  # another replica follows them; a full scan if we do
            return
        now = time.monotonic()
        full = now - self._last_full >= FULL_SCAN_S
        previous = self._last_full
        # stays so if the pass crashes: the pass after the restart reads every job event again
        self._last_full = float("-inf")
        try:
            self._service.sync(full=full)
        except ControllerError as exc:
            self._failures.failed(exc)
            self._last_full = previous
        else:
            self._failures.succeeded()
            self._last_full = now if full else previous
