"""Keeping a Jetson's facts in step with its power mode, for the reconcile loop.

The agent switches nvpmodel only when a slot's config asks for it (:meth:`PowerTuning.apply`) and
re-reads the mode every :data:`POWER_CHECK_S` on a real Jetson (:meth:`PowerTuning.check`), since
an operator may change it by hand. A changed mode changes the device's tuning tag; the loop then
re-marks which active engines still match it and retunes the others while they keep serving.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from agent.jobs.power import Apply, PowerControl, PowerError, Refuse
from shared.facts import DeviceFacts
from shared.messages import ModelSlot

log = logging.getLogger(__name__)

POWER_CHECK_S = 30.0
"""How often a real Jetson's power mode is read again (a change triggers retuning)."""

Emit = Callable[..., None]
"""``emit(kind, slot, message, **data)``: the daemon's event publisher."""


class PowerTuning:
    """The device's current facts, the power mode in them, and when to look at it again."""

    def __init__(
        self,
        facts: DeviceFacts,
        emit: Emit,
        power: PowerControl | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.facts = facts
        self._emit = emit
        self._power = power or PowerControl()
        self._clock = clock
        self.watch = facts.jetson is not None and not facts.simulated
        """Only a real Jetson has a power mode to watch and apply."""
        self._next_check = clock() + POWER_CHECK_S

    def apply(self, slot: ModelSlot) -> bool:
        """Switch nvpmodel to ``slot``'s power mode when its config allows it (no reboot).

        True when the facts' power mode changed as a result.
        """
        if slot.delegate.power_mode is None or not self.watch:
            return False
        try:
            action = self._power.ensure(slot.delegate, self.facts)
        except PowerError as exc:
            self._emit("error", slot.name, f"power mode not applied: {exc}")
            return False
        if isinstance(action, Refuse):
            self._emit("error", slot.name, action.reason)
        elif isinstance(action, Apply):
            log.info("%s", action.reason)
            return self.refresh()
        return False

    def due(self) -> bool:
        """True when a real Jetson's power mode should be read again now."""
        if not self.watch or self._clock() < self._next_check:
            return False
        self._next_check = self._clock() + POWER_CHECK_S
        return True

    def refresh(self) -> bool:
        """Re-read nvpmodel; True when the mode changed (``facts`` updated)."""
        jetson = self.facts.jetson
        mode = self._power.current()
        if jetson is None or mode is None:
            return False
        if (jetson.power_mode, jetson.power_mode_id) == (mode.name, mode.id):
            return False
        update: dict[str, Any] = {"power_mode": mode.name, "power_mode_id": mode.id}
        self.facts = self.facts.model_copy(update={"jetson": jetson.model_copy(update=update)})
        log.info("power mode is now %s (%d)", mode.name, mode.id)
        return True
