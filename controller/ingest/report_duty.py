"""Which replica stores reported state: the one running the rollouts.

Reported state (``<prefix>/<device>/reported``) is retained on the broker and says everything
about a device's slots; each new one replaces the last. With a plain subscription in every
replica, each of R replicas decoded and stored every report (R UPDATEs of the same row, and
their row locks in the way of the rollout leader's writes): at the 10,000-device bench, a
follower spent ~40 % of its samples storing reports the leader stored too. A shared
subscription would hand each report to one replica, but to any one: two reports of one device
could then be stored out of order by two replicas (same generation, an older phase last), and
MQTT does not deliver retained messages to shared subscribers.

So one replica follows the ``reported`` topics, the one holding the rollout lease (it needs them
first, to judge its waves), and the others do not subscribe to them at all. Taking the lease
subscribes, and the broker delivers every device's retained report at once: what was reported
while no replica listened (the old leader killed, the lease not yet taken) is stored then, the
latest report of each device, which is all the controller keeps. Losing the lease unsubscribes.
For a moment two replicas may both store (the old leader has not noticed yet): harmless, as
before, since a report of an older generation than the stored one only counts as contact.

Presence (``status``) stays with every replica: it is small, and the last will that marks a
device offline must not wait for a takeover.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from shared.supervision import Periodic

logger = logging.getLogger(__name__)

CHECK_S = 0.5
"""How often a replica compares its subscription with its lease (the lease's TTL is seconds)."""


class Follower(Protocol):
    def follow(self, filters: Sequence[str]) -> None: ...

    def unfollow(self, filters: Sequence[str]) -> None: ...


class ReportDuty:
    """Keeps ``bus`` subscribed to ``filters`` exactly while ``leads()`` is true."""

    def __init__(
        self,
        bus: Follower,
        filters: Sequence[str],
        leads: Callable[[], bool],
        interval_s: float = CHECK_S,
    ) -> None:
        self._bus = bus
        self._filters = list(filters)
        self._leads = leads
        self._following = False
        self._lock = threading.Lock()
        self._periodic = Periodic("jetfleet-report-duty", self.sync, interval_s)

    @property
    def following(self) -> bool:
        return self._following

    def start(self) -> None:
        self.sync()
        self._periodic.start()

    def stop(self) -> None:
        self._periodic.stop()

    def sync(self) -> None:
        """Subscribe or unsubscribe as the lease says (called on a timer and on taking it)."""
        with self._lock:
            want = self._leads()
            if want == self._following:
                return
            if want:
                self._bus.follow(self._filters)
                logger.info("this replica stores reported state (it runs the rollouts)")
            else:
                self._bus.unfollow(self._filters)
                logger.info("reported state is stored by the replica running the rollouts")
            self._following = want
