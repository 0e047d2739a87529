"""Rollouts in the database: rollouts, their targets, device claims, audit, leader lease.

One transaction per method; SQLAlchemy errors become :mod:`controller.errors` here. Device
claims are rows keyed by device id, so "one active rollout per device" holds even when two
replicas create rollouts at once: the second insert fails and is refused naming the holder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from controller.db.lease_rows import decide_locked
from controller.db.rollout_rows import (
    add_audit,
    audit_row,
    rollout_record,
    rollout_row,
    target_row,
    target_values,
    targets_of,
    write_targets,
)
from controller.db.schema import TelemetrySample
from controller.db.schema_rollouts import (
    ControllerLease,
    RolloutAuditRow,
    RolloutClaim,
    RolloutRow,
    TargetRow,
)
from controller.db.session import SessionStore
from controller.errors import Conflict, NotFound
from controller.records import (
    ACTIVE,
    AuditEntry,
    Operation,
    Rollout,
    RolloutState,
    Target,
    TargetStatus,
)


class RolloutStore(SessionStore):
    """The ``rollouts``, ``rollout_targets``, ``rollout_claims``, ``rollout_audit`` and
    ``controller_leases`` tables."""

    # --- rollouts ------------------------------------------------------------------------------

    def create(self, rollout: Rollout, audit: Sequence[AuditEntry]) -> None:
        """Store a new rollout with its targets; claim every non-skipped target device.

        :class:`Conflict` names the active rollout holding a device when one does.
        """
        claimed = [t.device_id for t in rollout.targets if t.status is not TargetStatus.SKIPPED]
        try:
            with self._tx() as session:
                _refuse_claimed(session, rollout.id, claimed)
                session.add(rollout_row(rollout))
                session.flush()
                # Bulk inserts, not ORM objects: 10,000 targets and their claims took the
                # ORM's unit of work seconds between a rollout's creation and its first wave.
                if rollout.targets:
                    session.execute(
                        insert(TargetRow), [target_values(rollout.id, t) for t in rollout.targets]
                    )
                if claimed:
                    session.execute(
                        insert(RolloutClaim),
                        [{"device_id": d, "rollout_id": rollout.id} for d in claimed],
                    )
                session.add_all(audit_row(rollout.id, e) for e in audit)
        except IntegrityError as exc:
            with self._tx() as session:
                _refuse_claimed(session, rollout.id, claimed)
            raise Conflict(f"rollout {rollout.id} could not be stored: {exc.orig}") from exc

    def claim(self, rollout_id: str, device_ids: Sequence[str]) -> None:
        """Claim devices for ``rollout_id`` (again); :class:`Conflict` names another holder."""
        try:
            with self._tx() as session:
                _refuse_claimed(session, rollout_id, device_ids)
                held = set(
                    session.execute(
                        select(RolloutClaim.device_id).where(
                            RolloutClaim.rollout_id == rollout_id,
                            RolloutClaim.device_id.in_(list(device_ids)),
                        )
                    ).scalars()
                )
                session.add_all(
                    RolloutClaim(device_id=d, rollout_id=rollout_id)
                    for d in device_ids
                    if d not in held
                )
        except IntegrityError as exc:
            with self._tx() as session:
                _refuse_claimed(session, rollout_id, device_ids)
            raise Conflict(f"devices of rollout {rollout_id} were claimed concurrently") from exc

    def claims(self) -> dict[str, str]:
        """Every claimed device → the rollout holding it."""
        with self._tx() as session:
            rows = session.execute(select(RolloutClaim.device_id, RolloutClaim.rollout_id))
            return {str(d): str(r) for d, r in rows}

    def add_targets(self, rollout_id: str, targets: Sequence[Target]) -> list[str]:
        """Add late-enrolled devices (claimed first); returns the ids that were added."""
        added: list[str] = []
        for target in targets:
            try:
                with self._tx() as session:
                    if session.get(RolloutClaim, target.device_id) is not None:
                        continue
                    session.add(RolloutClaim(device_id=target.device_id, rollout_id=rollout_id))
                    session.add(target_row(rollout_id, target))
                added.append(target.device_id)
            except IntegrityError:
                continue  # claimed by someone else meanwhile
        return added

    def get(self, rollout_id: str) -> Rollout:
        """One rollout with its targets, or :class:`NotFound`."""
        with self._tx() as session:
            row = session.get(RolloutRow, rollout_id)
            if row is None:
                raise NotFound(f"unknown rollout '{rollout_id}': see `jetfleet rollouts ls`")
            return rollout_record(row, targets_of(session, [rollout_id]).get(rollout_id, []))

    def all(self) -> list[Rollout]:
        """Every rollout with its targets, newest first."""
        with self._tx() as session:
            rows = list(
                session.execute(
                    select(RolloutRow).order_by(RolloutRow.created_at.desc(), RolloutRow.id)
                ).scalars()
            )
            targets = targets_of(session, [r.id for r in rows])
            return [rollout_record(r, targets.get(r.id, [])) for r in rows]

    def to_run(self) -> list[str]:
        """Ids of the rollouts the loop must look at: active ones and those with a request."""
        with self._tx() as session:
            rows = session.execute(
                select(RolloutRow.id)
                .where(
                    RolloutRow.state.in_([s.value for s in ACTIVE])
                    | RolloutRow.requested_op.is_not(None)
                )
                .order_by(RolloutRow.created_at, RolloutRow.id)
            ).scalars()
            return list(rows)

    def request(self, rollout_id: str, op: Operation, actor: str) -> None:
        """Record an operator's request for the loop; one request at a time."""
        with self._tx() as session:
            row = session.get(RolloutRow, rollout_id, with_for_update=True)
            if row is None:
                raise NotFound(f"unknown rollout '{rollout_id}': see `jetfleet rollouts ls`")
            if row.requested_op is not None:
                raise Conflict(
                    f"rollout {rollout_id} already has a pending {row.requested_op} request "
                    f"by {row.requested_by}: wait for it to be applied"
                )
            row.requested_op = op.value
            row.requested_by = actor

    def clear_request(self, rollout_id: str, audit: AuditEntry) -> None:
        """Drop a request the loop could not apply, saying why in the audit trail."""
        with self._tx() as session:
            session.execute(
                update(RolloutRow)
                .where(RolloutRow.id == rollout_id)
                .values(requested_op=None, requested_by=None)
            )
            session.add(audit_row(rollout_id, audit))

    def save(
        self,
        rollout: Rollout,
        *,
        state: RolloutState,
        reason: str | None,
        current_wave: int,
        targets: Iterable[Target],
        audit: Sequence[AuditEntry],
        now: datetime,
        clear_request: bool = False,
    ) -> None:
        """Persist one evaluation: the rollout's state, changed targets, audit entries.

        A rollout leaving the active states releases its device claims.
        """
        with self._tx() as session:
            row = session.get(RolloutRow, rollout.id, with_for_update=True)
            if row is None:
                raise NotFound(f"unknown rollout '{rollout.id}'")
            if row.started_at is None and state is not RolloutState.PENDING:
                row.started_at = now
            if state != RolloutState(row.state) and state not in ACTIVE:
                row.finished_at = now
            if state in ACTIVE:
                row.finished_at = None
            row.state = state.value
            row.reason = reason
            row.current_wave = current_wave
            row.updated_at = now
            if clear_request:
                row.requested_op = None
                row.requested_by = None
            write_targets(session, rollout.id, list(targets))
            add_audit(session, rollout.id, audit)
            if state not in ACTIVE:
                session.execute(delete(RolloutClaim).where(RolloutClaim.rollout_id == rollout.id))

    def save_targets(self, rollout_id: str, targets: Sequence[Target]) -> None:
        """Persist targets only (e.g. the generation published to each)."""
        with self._tx() as session:
            write_targets(session, rollout_id, list(targets))

    def audit(self, rollout_id: str, limit: int = 1000) -> list[AuditEntry]:
        """The newest ``limit`` audit entries of a rollout, oldest first."""
        self.get(rollout_id)
        with self._tx() as session:
            rows = session.execute(
                select(RolloutAuditRow)
                .where(RolloutAuditRow.rollout_id == rollout_id)
                .order_by(RolloutAuditRow.id.desc())
                .limit(limit)
            ).scalars()
            return [
                AuditEntry(r.ts, r.actor, r.kind, r.from_state, r.to_state, r.reason, r.device_id)
                for r in reversed(list(rows))
            ]

    # --- telemetry for gates -------------------------------------------------------------------

    def telemetry_since(
        self, since: Mapping[str, datetime]
    ) -> dict[str, list[list[dict[str, Any]]]]:
        """Per device, the ``models`` lists of its samples with ``ts`` ≥ its own start time."""
        if not since:
            return {}
        with self._tx() as session:
            rows = session.execute(
                select(TelemetrySample.device_id, TelemetrySample.ts, TelemetrySample.models)
                .where(
                    TelemetrySample.device_id.in_(list(since)),
                    TelemetrySample.ts >= min(since.values()),
                )
                .order_by(TelemetrySample.ts)
            ).all()
        result: dict[str, list[list[dict[str, Any]]]] = {}
        for device_id, ts, models in rows:
            if ts >= since[device_id]:
                result.setdefault(device_id, []).append(list(models or []))
        return result

    def telemetry_before(
        self, device_ids: Sequence[str], now: datetime, window_s: float
    ) -> dict[str, list[list[dict[str, Any]]]]:
        """Per device, the ``models`` lists of its samples of the last ``window_s`` seconds."""
        if not device_ids:
            return {}
        return self.telemetry_since(dict.fromkeys(device_ids, now - timedelta(seconds=window_s)))

    # --- leadership ----------------------------------------------------------------------------

    def hold_lease(self, name: str, holder: str, ttl_s: float, now: datetime) -> bool:
        """Take or renew the lease ``name`` for ``holder``; False while another holds it."""

        def decide(session: Session) -> bool:
            return decide_locked(
                session,
                sqlite=self._sqlite,
                model=ControllerLease,
                key=name,
                holder=holder,
                ttl_s=ttl_s,
                now=now,
                new_row=lambda lease: ControllerLease(
                    name=name, holder=lease.holder, expires_at=lease.expires_at
                ),
            ).granted

        # run again when another replica inserted the first lease row
        return self._tx_retried(decide, f"could not decide the controller lease {name!r}: retry")

    def release_lease(self, name: str, holder: str) -> None:
        """Give the lease up (nothing when ``holder`` does not hold it)."""
        with self._tx() as session:
            session.execute(
                delete(ControllerLease).where(
                    ControllerLease.name == name, ControllerLease.holder == holder
                )
            )

    def lease_holder(self, name: str, now: datetime) -> str | None:
        """Who holds the unexpired lease ``name`` (None: nobody)."""
        with self._tx() as session:
            row = session.get(ControllerLease, name)
            return None if row is None or row.expires_at <= now else row.holder


def _refuse_claimed(session: Session, rollout_id: str, device_ids: Sequence[str]) -> None:
    if not device_ids:
        return
    rows = session.execute(
        select(RolloutClaim.device_id, RolloutClaim.rollout_id).where(
            RolloutClaim.device_id.in_(list(device_ids)), RolloutClaim.rollout_id != rollout_id
        )
    ).all()
    if rows:
        by_rollout: dict[str, list[str]] = {}
        for device_id, holder in rows:
            by_rollout.setdefault(holder, []).append(device_id)
        held = "; ".join(
            f"rollout {holder} holds {', '.join(sorted(devs)[:5])}"
            + (f" and {len(devs) - 5} more" if len(devs) > 5 else "")
            for holder, devs in sorted(by_rollout.items())
        )
        raise Conflict(
            f"{held}: a device takes part in one active rollout at a time; wait for it to "
            "finish, or abort it (`jetfleet rollouts abort ID`)"
        )
