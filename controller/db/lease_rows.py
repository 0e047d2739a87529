"""One lease row per name, decided under a row lock: engine build leases and controller leadership.

The decision itself is pure (:func:`controller.records.decide_lease`); this is the part that
makes it atomic. SQLite takes the write lock up front (``BEGIN IMMEDIATE``), PostgreSQL locks the
row (``SELECT ... FOR UPDATE``). When no row exists yet two callers may both insert; the loser
gets an IntegrityError and its caller decides again against the winner's row.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from sqlalchemy.orm import Session

from controller.db.schema import BuildLease
from controller.db.schema_rollouts import ControllerLease
from controller.records import Decision, Lease, decide_lease

Row = TypeVar("Row", BuildLease, ControllerLease)


def decide_locked(
    session: Session,
    *,
    sqlite: bool,
    model: type[Row],
    key: str | tuple[str, ...],
    holder: str,
    ttl_s: float,
    now: datetime,
    new_row: Callable[[Lease], Row],
) -> Decision:
    """Grant (insert or renew) or deny the lease ``key`` to ``holder`` inside ``session``."""
    if sqlite:
        session.connection().exec_driver_sql("BEGIN IMMEDIATE")
    row = session.get(model, key, with_for_update=True)
    existing = None if row is None else Lease(row.holder, row.expires_at)
    decision = decide_lease(existing, holder, ttl_s, now)
    if decision.granted:
        if row is None:
            session.add(new_row(decision.lease))
        else:
            row.holder = decision.lease.holder
            row.expires_at = decision.lease.expires_at
    return decision
