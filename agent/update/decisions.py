"""The update's decisions, pure: what to do with an order, what a restart means, when to
confirm. :mod:`agent.update.updates` does what they say.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from agent.update.journal import UpdateJournal
from agent.update.layout import RolledBack
from shared.agent_releases import TERMINAL_PHASES, AgentReleaseOrder, is_older
from shared.messages import SlotPhase, SlotStatus

PRE_SWITCH = frozenset({"downloading", "verifying", "unpacking", "checking"})
"""Phases in which the running release is unchanged and the work can start over."""

OrderAction = Literal["ignore", "keep", "refuse", "install"]


@dataclass(frozen=True)
class OrderDecision:
    """``ignore``: nothing to do; ``keep``: the journal already carries this order (go on or
    stay where it ended); ``refuse``: refuse it with ``reason``; ``install``: start it."""

    action: OrderAction
    reason: str | None = None


def decide_order(
    order: AgentReleaseOrder | None, running: str, arch: str, journal: UpdateJournal | None
) -> OrderDecision:
    """What to do with the desired document's ``order`` on a device running ``running``."""
    if order is None:
        return OrderDecision("ignore")
    if journal is not None and journal.same_order(order):
        return OrderDecision("keep")
    if order.version == running:
        return OrderDecision("ignore")
    if is_older(order.version, running) and not order.allow_downgrade:
        return OrderDecision(
            "refuse",
            f"release {order.version} is older than the running {running}: "
            "the operator must allow the downgrade",
        )
    if order.arch != arch:
        return OrderDecision(
            "refuse", f"release {order.version} is built for {order.arch}, this device is {arch}"
        )
    return OrderDecision("install")


@dataclass(frozen=True)
class Resumed:
    """What the journal becomes at start: ``phase`` and ``error`` (None: unchanged)."""

    phase: str
    error: str | None = None


def after_start(
    journal: UpdateJournal, running: str, current: str | None, rolled_back: RolledBack | None
) -> Resumed | None:
    """What a started agent makes of the journal it finds (None: keep it as it is).

    ``running``: this process's version; ``current``: the release ``current`` names;
    ``rolled_back``: the launcher's last rollback record.
    """
    phase = journal.phase
    version = journal.order.version
    if phase in TERMINAL_PHASES:
        return None
    if phase in PRE_SWITCH:
        return Resumed("downloading")  # the running release is unchanged: start over
    if running == version:
        return Resumed("confirming") if phase != "confirming" else None
    if (
        rolled_back is not None
        and rolled_back.version == version
        and rolled_back.at >= int(journal.at.timestamp()) - 1  # not an earlier attempt's
    ):
        return Resumed("rolled_back", rolled_back.reason or "the launcher switched back")
    if phase == "switching" and current != version:
        return Resumed("downloading")  # stopped before the link moved: start over
    return Resumed(
        "failed",
        f"the launcher started {running} instead of {version} (current names {current}): "
        "was the agent started without the launcher, or the package reinstalled?",
    )


def serving_names(statuses: Iterable[SlotStatus]) -> tuple[str, ...]:
    """The slots that serve now (recorded before a restart)."""
    return tuple(sorted(s.name for s in statuses if s.phase is SlotPhase.SERVING))


def ready_to_confirm(
    connected: bool, statuses: Sequence[SlotStatus], serving_before: Sequence[str]
) -> bool:
    """True once the broker is connected and every slot that served before the restart and is
    still desired serves again."""
    if not connected or (serving_before and not statuses):
        return False  # no desired state applied yet: nothing is known to serve
    phases = {s.name: s.phase for s in statuses}
    return all(phases[name] is SlotPhase.SERVING for name in serving_before if name in phases)
