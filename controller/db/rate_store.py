"""Enrolment rate-limit buckets (table ``enrol_rate_buckets``), shared by every replica.

Each attempt is one transaction: SQLite takes the write lock up front (``BEGIN IMMEDIATE``),
PostgreSQL locks the address's row (``SELECT ... FOR UPDATE``), so two replicas spending from one
bucket at once are serialised. When no row exists yet two may both insert; the loser gets an
IntegrityError and decides again against the winner's row. The decision (the token bucket) is
passed in by :class:`controller.trust.enrolment_rate.SharedRateLimiter`.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import delete
from sqlalchemy.orm import Session

from controller.db.schema_security import EnrolRateBucketRow
from controller.db.session import SessionStore


class RateBucketStore(SessionStore):
    """Token buckets keyed by client address."""

    def take(
        self,
        key: str,
        decide: Callable[[tuple[float, float] | None], tuple[float, float]],
        forget_before: float,
    ) -> None:
        """Store what ``decide`` makes of ``key``'s bucket ``(tokens, at)`` (None: no bucket yet)
        under its row lock; forget buckets untouched since ``forget_before`` (they are full)."""

        def decide_locked(session: Session) -> None:
            if self._sqlite:
                session.connection().exec_driver_sql("BEGIN IMMEDIATE")
            row = session.get(EnrolRateBucketRow, key, with_for_update=True)
            tokens, at = decide(None if row is None else (row.tokens, row.at))
            if row is None:
                session.add(EnrolRateBucketRow(key=key, tokens=tokens, at=at))
            else:
                row.tokens, row.at = tokens, at
            session.execute(
                delete(EnrolRateBucketRow).where(
                    EnrolRateBucketRow.at < forget_before, EnrolRateBucketRow.key != key
                )
            )

        # run again when another replica inserted this address's first bucket
        self._tx_retried(
            decide_locked, f"could not decide the enrolment rate limit of {key!r}: retry"
        )
