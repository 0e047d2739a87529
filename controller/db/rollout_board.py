"""Rollouts as dashboards count them: rollouts per state, and each rollout's progress per wave.

A read model over the rollout tables (:mod:`controller.db.schema_rollouts`) for ``/metrics`` and
the dashboard's rollout page; the rollout loop reads and writes through
:class:`~controller.db.rollout_store.RolloutStore`. Part of
:class:`~controller.db.repository.Repository`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import func, select

from controller.db.schema_rollouts import RolloutRow, TargetRow
from controller.db.session import SessionStore


class RolloutBoard(SessionStore):
    """Counts over ``rollouts`` and ``rollout_targets``."""

    def rollouts_by_state(self) -> dict[str, int]:
        """How many rollouts are in each state (states without rollouts absent)."""
        with self._tx() as session:
            rows = session.execute(
                select(RolloutRow.state, func.count()).group_by(RolloutRow.state)
            ).all()
            return {str(state): int(n) for state, n in rows}

    def rollout_progress(self, limit: int = 50) -> list[dict[str, Any]]:
        """The newest ``limit`` rollouts, each with its target count per wave and status
        (``targets``: wave → status → count)."""
        with self._tx() as session:
            rollouts = session.execute(
                select(
                    RolloutRow.id,
                    RolloutRow.model,
                    RolloutRow.version,
                    RolloutRow.state,
                    RolloutRow.current_wave,
                    RolloutRow.waves,
                    RolloutRow.created_at,
                )
                .order_by(RolloutRow.created_at.desc())
                .limit(limit)
            ).all()
            targets = session.execute(
                select(TargetRow.rollout_id, TargetRow.wave, TargetRow.status, func.count())
                .where(TargetRow.rollout_id.in_([r.id for r in rollouts]))
                .group_by(TargetRow.rollout_id, TargetRow.wave, TargetRow.status)
            ).all()
            waves: dict[str, dict[int, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
            for rollout_id, wave, status, count in targets:
                waves[str(rollout_id)][int(wave)][str(status)] = int(count)
        return [
            {
                "id": str(r.id),
                "model": r.model,
                "version": r.version,
                "state": r.state,
                "current_wave": r.current_wave,
                "waves": r.waves,
                "created_at": r.created_at,
                "targets": {w: dict(c) for w, c in sorted(waves[str(r.id)].items())},
            }
            for r in rollouts
        ]
