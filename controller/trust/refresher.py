"""The re-signing thread: republish every desired document when a deployed manifest went stale.

A signed manifest holds :data:`controller.trust.signing.DEFAULT_VALIDITY`; one with less than
half of it left, or signed by a key that is no longer active, is stale
(:meth:`FleetSigner.stale`). Every ``interval_s`` this thread asks, and when the answer is yes
it republishes every device's desired document (:meth:`Fleet.republish_all`), which signs the
manifests again, so a device offline for weeks still finds valid ones in its retained document
and devices learn of a key rotation without waiting for a deployment.

A database or broker error is logged and asked again at the next interval. Any other exception
used to end the thread without a word, and manifests then expired on devices a month later; the
thread runs under :class:`shared.supervision.Supervised` (``restart``): the crash is logged
with the thread's name and the loop runs again after a back-off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from controller.errors import ControllerError
from shared.supervision import PeriodicService

logger = logging.getLogger(__name__)

INTERVAL_S = 300.0
"""How often the thread asks whether a deployed manifest went stale."""


class SignatureRefresher(PeriodicService):
    """Every ``interval_s``, republish all desired documents when ``stale()`` says so."""

    def __init__(
        self,
        stale: Callable[[], bool],
        republish: Callable[[], int],
        interval_s: float = INTERVAL_S,
        *,
        active: Callable[[], bool] = lambda: True,
    ) -> None:
        self._active = active
        """False in a replica that does not run the rollouts: the one that does re-signs."""
        self._stale = stale
        self._republish = republish
        super().__init__("jetfleet-resign", interval_s)

    def _tick(self) -> None:
        if not self._active():
            return
        try:
            if self._stale():
                count = self._republish()
                logger.info("manifests signed again; republished %d desired documents", count)
        except ControllerError as exc:
            logger.error("could not refresh manifest signatures: %s", exc)
