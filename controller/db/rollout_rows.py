"""Rollout records ↔ rows of the rollout tables: the mapping :mod:`controller.db.rollout_store`
writes and reads through (no transactions here; each function works inside the caller's session).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, select, update
from sqlalchemy.orm import Session

from controller.db.schema_rollouts import RolloutAuditRow, RolloutRow, TargetRow
from controller.records import (
    AuditEntry,
    Baseline,
    Operation,
    Rollout,
    RolloutSpec,
    RolloutState,
    Target,
    TargetStatus,
)


def rollout_row(r: Rollout) -> RolloutRow:
    """The ``rollouts`` row of a new rollout (no request pending)."""
    return RolloutRow(
        id=r.id,
        model=r.spec.model,
        version=r.spec.version,
        config=r.spec.config,
        spec=r.spec.model_dump(mode="json"),
        state=r.state.value,
        reason=r.reason,
        requested_op=None,
        requested_by=None,
        current_wave=r.current_wave,
        waves=r.waves,
        created_by=r.created_by,
        created_at=r.created_at,
        updated_at=r.updated_at,
        started_at=r.started_at,
        finished_at=r.finished_at,
    )


def target_row(rollout_id: str, t: Target) -> TargetRow:
    """The ``rollout_targets`` row of one target."""
    return TargetRow(**target_values(rollout_id, t))


def target_values(rollout_id: str, t: Target) -> dict[str, Any]:
    """The ``rollout_targets`` row of one target as column values, for a bulk insert."""
    return {
        "rollout_id": rollout_id,
        "device_id": t.device_id,
        "wave": t.wave,
        "status": t.status.value,
        "reason": t.reason,
        "previous": t.previous,
        "generation": t.generation,
        "started_at": t.started_at,
        "validated_at": t.validated_at,
        "finished_at": t.finished_at,
        "baseline": None if t.baseline is None else t.baseline.to_json(),
    }


def write_targets(session: Session, rollout_id: str, targets: list[Target]) -> None:
    """Copy each target onto its stored row (targets without a row are ignored).

    One executemany of a Core UPDATE: a wave of 5,000 devices changed 5,000 rows at once, and
    loading them as ORM objects to set their attributes and flush them took seconds."""
    if not targets:
        return
    table = cast(Table, TargetRow.__table__)
    c = table.c

    def param(name: str) -> Any:
        return bindparam(f"b_{name}", type_=c[name].type)

    columns = (
        "wave",
        "status",
        "reason",
        "previous",
        "generation",
        "started_at",
        "validated_at",
        "finished_at",
        "baseline",
    )
    stmt = (
        update(table)
        .where(c.rollout_id == bindparam("b_rollout"), c.device_id == bindparam("b_device"))
        .values({name: param(name) for name in columns})
    )
    session.execute(
        stmt,
        [
            {
                "b_rollout": rollout_id,
                "b_device": t.device_id,
                "b_wave": t.wave,
                "b_status": t.status.value,
                "b_reason": t.reason,
                "b_previous": t.previous,
                "b_generation": t.generation,
                "b_started_at": t.started_at,
                "b_validated_at": t.validated_at,
                "b_finished_at": t.finished_at,
                "b_baseline": None if t.baseline is None else t.baseline.to_json(),
            }
            for t in targets
        ],
    )


def add_audit(session: Session, rollout_id: str, entries: Sequence[AuditEntry]) -> None:
    """Insert these audit entries (one multi-row INSERT, not an ORM object each)."""
    if not entries:
        return
    session.execute(
        insert(RolloutAuditRow),
        [
            {
                "rollout_id": rollout_id,
                "ts": e.ts,
                "actor": e.actor[:64],
                "kind": e.kind,
                "from_state": e.from_state,
                "to_state": e.to_state,
                "device_id": e.device_id,
                "reason": e.reason,
            }
            for e in entries
        ],
    )


def audit_row(rollout_id: str, e: AuditEntry) -> RolloutAuditRow:
    """The ``rollout_audit`` row of one entry (the actor cut to the column's 64 characters)."""
    return RolloutAuditRow(
        rollout_id=rollout_id,
        ts=e.ts,
        actor=e.actor[:64],
        kind=e.kind,
        from_state=e.from_state,
        to_state=e.to_state,
        device_id=e.device_id,
        reason=e.reason,
    )


def targets_of(session: Session, rollout_ids: Sequence[str]) -> dict[str, list[Target]]:
    """The targets of these rollouts, by wave then insertion order.

    Read as plain rows, not ORM objects: the rollout loop reads every target of a running
    rollout each tick (10,000 at the scale bench), and the ORM's identity map and instance
    state were most of that read's time."""
    if not rollout_ids:
        return {}
    t = TargetRow
    rows = session.execute(
        select(
            t.rollout_id,
            t.device_id,
            t.wave,
            t.status,
            t.reason,
            t.previous,
            t.generation,
            t.started_at,
            t.validated_at,
            t.finished_at,
            t.baseline,
        )
        .where(t.rollout_id.in_(list(rollout_ids)))
        .order_by(t.wave, t.id)
    )
    result: dict[str, list[Target]] = {}
    for r in rows:
        result.setdefault(r.rollout_id, []).append(
            Target(
                device_id=r.device_id,
                wave=r.wave,
                status=TargetStatus(r.status),
                reason=r.reason,
                previous=r.previous,
                generation=r.generation,
                started_at=r.started_at,
                validated_at=r.validated_at,
                finished_at=r.finished_at,
                baseline=Baseline.from_json(r.baseline),
            )
        )
    return result


def rollout_record(row: RolloutRow, targets: list[Target]) -> Rollout:
    """The record of a stored rollout with its ``targets``."""
    return Rollout(
        id=row.id,
        spec=RolloutSpec.model_validate(row.spec),
        state=RolloutState(row.state),
        created_at=row.created_at,
        updated_at=row.updated_at,
        created_by=row.created_by,
        reason=row.reason,
        requested_op=None if row.requested_op is None else Operation(row.requested_op),
        requested_by=row.requested_by,
        current_wave=row.current_wave,
        waves=row.waves,
        started_at=row.started_at,
        finished_at=row.finished_at,
        targets=tuple(targets),
    )
