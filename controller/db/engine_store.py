"""Engine manifests and build leases in the database, one transaction per method.

A lease request runs :func:`controller.leases.decide` inside a transaction that holds the lease
row's write lock: ``BEGIN IMMEDIATE`` on SQLite (one writer at a time), ``SELECT ... FOR UPDATE``
on PostgreSQL. When no row exists yet, two first requests both insert and the primary key lets
one commit; the other retries and then sees (and is denied by) the winner's lease.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import Engine, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from controller.db.lease_rows import decide_locked
from controller.db.schema import Artifact, BuildLease, EngineRecord, utcnow
from controller.db.session import make_sessionmaker, transaction
from controller.errors import Conflict, DatabaseError
from controller.leases import Decision
from shared.engines import EngineManifest

_RETRIES = 5


class EngineStoreDb:
    """The ``engines`` and ``build_leases`` tables."""

    def __init__(self, engine: Engine) -> None:
        self._sessions = make_sessionmaker(engine)
        self._sqlite = engine.dialect.name == "sqlite"

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        with transaction(self._sessions) as session:
            yield session

    def add_artifact(self, sha256: str, size: int) -> bool:
        """Record an artifact's row (bytes already in the store); False when it existed."""
        try:
            with self._tx() as session:
                if session.get(Artifact, sha256) is not None:
                    return False
                session.add(Artifact(sha256=sha256, size=size))
            return True
        except IntegrityError:
            return False

    def manifest(self, key: str) -> EngineManifest | None:
        """The manifest stored under ``key``, if any."""
        with self._tx() as session:
            row = session.get(EngineRecord, key)
            return None if row is None else EngineManifest.model_validate(row.manifest)

    def manifests(self) -> list[EngineManifest]:
        """Every stored manifest, oldest first."""
        with self._tx() as session:
            rows = session.execute(
                select(EngineRecord).order_by(EngineRecord.created_at, EngineRecord.engine_key)
            ).scalars()
            return [EngineManifest.model_validate(r.manifest) for r in rows]

    def put_manifest(self, manifest: EngineManifest) -> bool:
        """Store ``manifest`` and release its build lease; False when the same one was stored.

        A different manifest under the same key is a :class:`Conflict`.
        """
        for _ in range(_RETRIES):
            try:
                with self._tx() as session:
                    row = session.get(EngineRecord, manifest.engine_key)
                    if row is not None:
                        _same_or_conflict(EngineManifest.model_validate(row.manifest), manifest)
                        return False
                    if session.get(Artifact, manifest.sha256) is None:
                        session.add(Artifact(sha256=manifest.sha256, size=manifest.size))
                    session.add(
                        EngineRecord(
                            engine_key=manifest.engine_key,
                            sha256=manifest.sha256,
                            size=manifest.size,
                            built_by=manifest.built_by,
                            manifest=manifest.model_dump(mode="json"),
                            created_at=utcnow(),
                        )
                    )
                    session.execute(
                        delete(BuildLease).where(BuildLease.engine_key == manifest.engine_key)
                    )
                return True
            except IntegrityError:
                continue  # stored concurrently: compare with the winner
        raise DatabaseError(f"could not store engine {manifest.engine_key}: retry the upload")

    def acquire_lease(self, key: str, device_id: str, ttl_s: float, now: datetime) -> Decision:
        """Grant or deny the build lease of ``key`` to ``device_id`` (atomic; see the module)."""
        for _ in range(_RETRIES):
            try:
                with self._tx() as session:
                    return decide_locked(
                        session,
                        sqlite=self._sqlite,
                        model=BuildLease,
                        key=key,
                        holder=device_id,
                        ttl_s=ttl_s,
                        now=now,
                        new_row=lambda lease: BuildLease(
                            engine_key=key, holder=lease.holder, expires_at=lease.expires_at
                        ),
                    )
            except IntegrityError:
                continue  # another device inserted the first lease: decide again against it
        raise DatabaseError(f"could not decide the build lease of {key}: retry")

    def release_lease(self, key: str, device_id: str) -> None:
        """Drop ``device_id``'s lease of ``key`` (nothing when it holds none)."""
        with self._tx() as session:
            session.execute(
                delete(BuildLease).where(
                    BuildLease.engine_key == key, BuildLease.holder == device_id
                )
            )


def _same_or_conflict(stored: EngineManifest, new: EngineManifest) -> None:
    if stored != new:
        raise Conflict(
            f"engine {new.engine_key} is already stored with another manifest (built by "
            f"{stored.built_by}, sha256 {stored.sha256[:12]}…): GET it instead of uploading"
        )
