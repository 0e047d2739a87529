"""Holding a write while the database cannot be reached.

A PostgreSQL restart, a failover or a refused connection (:func:`controller.db.session.
unavailable`) is not a refusal of the data: ingest keeps what it was writing and writes it
again, backing off from 0.5 s up to :data:`OUTAGE_BACKOFF_CAP_S`, for up to a limit (default
:data:`OUTAGE_LIMIT_S`), with one line when the outage starts, one when the database is back and
one ERROR if the limit passes. The batched telemetry writer (:mod:`controller.ingest.batch`) and
the reported-state handler (:mod:`controller.ingest.handlers`) use it.
"""

from __future__ import annotations

import logging
import time

logger = logging.getLogger(__name__)

OUTAGE_LIMIT_S = 300.0
"""How long one write is held and tried again while the database cannot be reached."""
OUTAGE_BACKOFF_CAP_S = 5.0
"""The longest pause between two tries of a held write."""


class Outage:
    """One write held while the database cannot be reached: its back-off, limit and lines.

    ``what`` names the write in the lines (``"14 telemetry messages"``, ``"reported from gw-1"``).
    """

    def __init__(self, what: str, limit_s: float, exc: Exception) -> None:
        self.what = what
        self.limit_s = limit_s
        self.began = time.monotonic()
        self.tries = 0
        logger.warning(
            "the database is unavailable (%s): holding %s and writing it again for up to %.0f s",
            exc,
            what,
            limit_s,
        )

    def holds(self) -> bool:
        """Whether the limit has not passed yet."""
        return time.monotonic() - self.began < self.limit_s

    def pause(self) -> None:
        """Sleep before the next try: 0.5 s doubling up to the cap, never past the limit."""
        self.tries += 1
        left = self.limit_s - (time.monotonic() - self.began)
        backoff: float = 0.5 * 2.0 ** (self.tries - 1)
        time.sleep(max(0.0, min(backoff, OUTAGE_BACKOFF_CAP_S, left)))

    def over(self) -> None:
        """The write went through."""
        logger.warning(
            "the database is back after %.1f s: stored %s", time.monotonic() - self.began, self.what
        )

    def give_up(self, exc: Exception) -> None:
        """The limit passed; the caller drops the write (and counts it)."""
        logger.error(
            "the database stayed unavailable for %.0f s (%s): giving up %s",
            time.monotonic() - self.began,
            exc,
            self.what,
        )
