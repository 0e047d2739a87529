"""Keeps a granted build lease alive while this device builds (:mod:`agent.engines.resolver`)."""

from __future__ import annotations

import logging
import threading

from agent.engines.store_client import StoreClient
from agent.errors import AgentError
from shared.supervision import Supervised

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews a granted build lease every third of its lifetime until stopped.

    A renewal the store refuses or cannot answer is logged and tried again a third later; the
    thread runs under :class:`shared.supervision.Supervised` (policy ``restart``), so anything
    else that raises is logged and renewing resumes after a backoff: a lease that silently
    stopped being renewed would expire mid-build and let a twin build the same engine.
    """

    def __init__(
        self, store: StoreClient, key: str, tuning: str, device_id: str, ttl_s: float
    ) -> None:
        self._store = store
        self._key = key
        self._tuning = tuning
        self._device_id = device_id
        self._ttl_s = ttl_s
        self._stop = threading.Event()
        self._thread = Supervised(
            "lease-keeper", self._run, policy="restart", stop=self._stop, logger=log
        ).start()

    def _run(self) -> None:
        while not self._stop.wait(self._ttl_s / 3):
            try:
                self._store.lease(self._key, self._device_id, self._ttl_s, self._tuning)
            except AgentError as exc:
                log.warning("could not renew the build lease on %s: %s", self._key[:12], exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
