"""The fleet's public signing keys and the signed manifests of model versions and engines.

One transaction per method; rows leave as plain records. Private keys are never here: they live
in files under the controller's data directory (``controller.trust.signing``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from controller.db.schema import Deployment, Device, EngineRecord, ModelVersion
from controller.db.schema_agents import AgentReleaseRow
from controller.db.schema_security import SigningKeyRow
from controller.db.session import SessionStore
from controller.errors import Conflict


@dataclass(frozen=True)
class KeyRecord:
    """A fleet public key: raw 32 bytes in base64; ``endorsement`` set for a rotated-in key."""

    key_id: str
    public_key: str
    created_at: datetime
    retired_at: datetime | None
    endorsement: dict[str, Any] | None


class SigningStore(SessionStore):
    """The ``signing_keys`` table and the ``signed_manifest`` columns."""

    # --- keys --------------------------------------------------------------------------------

    def all_keys(self) -> list[KeyRecord]:
        """Every key, oldest first."""
        with self._tx() as session:
            rows = session.execute(
                select(SigningKeyRow).order_by(SigningKeyRow.created_at, SigningKeyRow.key_id)
            ).scalars()
            return [_key(r) for r in rows]

    def active_key(self) -> KeyRecord | None:
        """The newest key that is not retired, if any."""
        with self._tx() as session:
            row = session.execute(newest_unretired_key()).scalar_one_or_none()
            return None if row is None else _key(row)

    def add_first_key(self, key_id: str, public_key: str, now: datetime) -> KeyRecord:
        """Store the fleet's first key; :class:`Conflict` when an active key exists already.

        Replicas starting at once on an empty database race here: the table is locked first
        (SQLite: the write lock, PostgreSQL: ``LOCK TABLE``), since ``FOR UPDATE`` on no rows
        locks nothing and both would store a first key."""
        try:
            with self._tx() as session:
                if self._sqlite:
                    session.connection().exec_driver_sql("BEGIN IMMEDIATE")
                else:
                    session.execute(text("LOCK TABLE signing_keys IN SHARE ROW EXCLUSIVE MODE"))
                if _active(session) is not None:
                    raise Conflict("the fleet already has an active signing key")
                row = SigningKeyRow(key_id=key_id, public_key=public_key, created_at=now)
                session.add(row)
                session.flush()
                return _key(row)
        except IntegrityError as exc:
            raise Conflict(f"signing key {key_id} is stored already") from exc

    def rotate(
        self,
        old_key_id: str,
        key_id: str,
        public_key: str,
        endorsement: dict[str, Any],
        now: datetime,
    ) -> KeyRecord:
        """Retire ``old_key_id`` and store its endorsed successor, in one transaction.

        :class:`Conflict` when ``old_key_id`` is no longer the active key (a concurrent rotation).
        """
        try:
            with self._tx() as session:
                old = _active(session)
                if old is None or old.key_id != old_key_id:
                    raise Conflict(
                        f"signing key {old_key_id} is no longer the active key: rotated "
                        "concurrently; run `jetfleet keys show`"
                    )
                old.retired_at = now
                row = SigningKeyRow(
                    key_id=key_id, public_key=public_key, created_at=now, endorsement=endorsement
                )
                session.add(row)
                session.flush()
                return _key(row)
        except IntegrityError as exc:
            raise Conflict(f"signing key {key_id} is stored already") from exc

    # --- signed manifests --------------------------------------------------------------------

    def model_manifests(self, version_ids: Sequence[int]) -> dict[int, dict[str, Any] | None]:
        """The stored signed manifest (JSON) of each model version id."""
        if not version_ids:
            return {}
        with self._tx() as session:
            rows = session.execute(
                select(ModelVersion.id, ModelVersion.signed_manifest).where(
                    ModelVersion.id.in_(list(version_ids))
                )
            ).all()
            return {int(i): (dict(m) if m else None) for i, m in rows}

    def set_model_manifest(self, version_id: int, signed: dict[str, Any]) -> None:
        """Store the signed manifest of model version ``version_id``."""
        with self._tx() as session:
            row = session.get(ModelVersion, version_id)
            if row is not None:
                row.signed_manifest = signed

    def newest_serials(self, models: Sequence[str]) -> dict[str, int]:
        """The highest version id (serial) of each model."""
        if not models:
            return {}
        with self._tx() as session:
            rows = session.execute(
                select(ModelVersion.model, func.max(ModelVersion.id))
                .where(ModelVersion.model.in_(list(models)))
                .group_by(ModelVersion.model)
            ).all()
            return {str(m): int(i) for m, i in rows}

    def deployed_manifests(self) -> list[tuple[int, dict[str, Any] | None]]:
        """(version id, stored signed manifest) of every model version deployed somewhere."""
        with self._tx() as session:
            rows = session.execute(
                select(ModelVersion.id, ModelVersion.signed_manifest)
                .where(ModelVersion.id.in_(select(Deployment.model_version_id)))
                .order_by(ModelVersion.id)
            ).all()
            return [(int(i), dict(m) if m else None) for i, m in rows]

    def ordered_agent_manifests(self) -> list[dict[str, Any] | None]:
        """The stored signed manifest of every agent release some device is ordered to run."""
        with self._tx() as session:
            orders = session.execute(
                select(Device.agent_order).where(Device.agent_order.is_not(None))
            ).scalars()
            ids = sorted({int(o["release_id"]) for o in orders if o})
            if not ids:
                return []
            rows = session.execute(
                select(AgentReleaseRow.signed_manifest).where(AgentReleaseRow.id.in_(ids))
            ).scalars()
            return [dict(m) if m else None for m in rows]

    def engine_manifest(self, engine_key: str) -> dict[str, Any] | None:
        """The stored signed manifest of engine ``engine_key``."""
        with self._tx() as session:
            row = session.get(EngineRecord, engine_key)
            return None if row is None or not row.signed_manifest else dict(row.signed_manifest)

    def set_engine_manifest(self, engine_key: str, signed: dict[str, Any]) -> None:
        """Store the signed manifest of engine ``engine_key``."""
        with self._tx() as session:
            row = session.get(EngineRecord, engine_key)
            if row is not None:
                row.signed_manifest = signed


def newest_unretired_key() -> Select[SigningKeyRow]:
    """The query for the fleet's active key: the newest not retired (a tie: the greater id)."""
    return (
        select(SigningKeyRow)
        .where(SigningKeyRow.retired_at.is_(None))
        .order_by(SigningKeyRow.created_at.desc(), SigningKeyRow.key_id.desc())
        .limit(1)
    )


def _active(session: Session) -> SigningKeyRow | None:
    return session.execute(newest_unretired_key().with_for_update()).scalar_one_or_none()


def _key(row: SigningKeyRow) -> KeyRecord:
    return KeyRecord(
        key_id=row.key_id,
        public_key=row.public_key,
        created_at=row.created_at,
        retired_at=row.retired_at,
        endorsement=dict(row.endorsement) if row.endorsement else None,
    )
