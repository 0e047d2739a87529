"""What systemd hears from the agent: READY once, STATUS on phase changes, watchdog pings.

READY=1 goes out exactly once, when the broker acknowledged the agent's first ReportedState, or
— so a gateway that boots without its broker is not killed and restarted in a loop — when it
already serves its kept models, or once its KServe endpoint has served for
:data:`READY_GRACE_S` without a broker. The reconcile loop beats the :class:`Heartbeat` every tick
(and while it supervises a download or an engine build), so the watchdog stops pinging only when
the loop is stuck. The decisions are pure functions; :class:`ServiceNotifications` does the I/O.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from agent.service.sd_notify import Heartbeat, Notifier, Watchdog
from shared.messages import SlotPhase, SlotStatus

log = logging.getLogger(__name__)

READY_GRACE_S = 30.0
"""Serving this long without reaching the broker counts as started (systemd's READY)."""


def ready_reason(
    reported_acked: bool, models_ready: bool, serving_for_s: float, grace_s: float = READY_GRACE_S
) -> str | None:
    """Why the agent counts as started now, or None while it does not yet."""
    if reported_acked:
        return "reported its state to the broker"
    if models_ready:
        return "serving its kept models; broker not reached yet"
    if serving_for_s >= grace_s:
        return "serving KServe v2; broker not reached yet"
    return None


def phase_text(slots: Sequence[SlotStatus], desired_known: bool, connected: bool) -> str:
    """One line for ``systemctl status``: how many slots serve and what the others do."""
    if not desired_known:
        text = "waiting for the desired state"
    else:
        serving = sum(1 for s in slots if s.phase is SlotPhase.SERVING)
        text = f"serving {serving}/{len(slots)} models"
        others = [s for s in slots if s.phase is not SlotPhase.SERVING]
        for slot in others:
            text += f"; {slot.name} {slot.phase.value}"
            if slot.phase is SlotPhase.FAILED and slot.last_error:
                error = slot.last_error
                text += f": {error[:77]}..." if len(error) > 80 else f": {error}"
    return text if connected else f"{text}; broker not connected"


class ServiceNotifications:
    """The agent's side of ``Type=notify`` and ``WatchdogSec=`` (a no-op outside systemd)."""

    def __init__(
        self,
        notifier: Notifier | None = None,
        clock: Callable[[], float] = time.monotonic,
        grace_s: float = READY_GRACE_S,
    ) -> None:
        self.notifier = notifier or Notifier()
        self.heartbeat = Heartbeat(clock)
        self._clock = clock
        self._grace_s = grace_s
        self._serving_since: float | None = None
        self._ready_sent = False
        self._status: str | None = None
        self._watchdog: Watchdog | None = None

    @property
    def ready_sent(self) -> bool:
        """Whether READY=1 went out."""
        return self._ready_sent

    def serving(self) -> None:
        """The KServe endpoint is up: starts the grace period and the watchdog."""
        self._serving_since = self._clock()
        self.heartbeat.beat()
        self._watchdog = Watchdog.from_environment(self.notifier, self.heartbeat.last)
        if self._watchdog is not None:
            log.info("systemd watchdog: pinging every %.1f s", self._watchdog.watchdog_s / 4)
            self._watchdog.start()

    def tick(self, reported_acked: bool, models_ready: bool, status: str) -> None:
        """One loop tick: beat, send READY when due, and STATUS when the phase changed."""
        self.heartbeat.beat()
        if not self._ready_sent and self._serving_since is not None:
            reason = ready_reason(
                reported_acked, models_ready, self._clock() - self._serving_since, self._grace_s
            )
            if reason is not None:
                self._ready_sent = True
                self._status = status
                log.info("started: %s", reason)
                self.notifier.ready(status)
                return
        if status != self._status:
            self._status = status
            self.notifier.status(status)

    def stopping(self, why: str) -> None:
        """STOPPING=1: shutdown began."""
        self.notifier.stopping(why)

    def stop(self) -> None:
        """Stop the watchdog pings."""
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None
