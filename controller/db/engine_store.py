"""Engine manifests and build leases in the database, one transaction per method.

Manifests and leases are kept per (engine key, tuning tag): an engine built in one power mode is
valid in another, only tuned for other clocks, so twins in each power mode share their own build.

A lease request runs :func:`controller.leases.decide` inside a transaction that holds the lease
row's write lock: ``BEGIN IMMEDIATE`` on SQLite (one writer at a time), ``SELECT ... FOR UPDATE``
on PostgreSQL. When no row exists yet, two first requests both insert and the primary key lets
one commit; the other retries and then sees (and is denied by) the winner's lease.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from controller.db.lease_rows import decide_locked
from controller.db.schema import Artifact, BuildLease, EngineRecord, EngineTuning, utcnow
from controller.db.session import SessionStore
from controller.errors import Conflict, DatabaseError
from controller.leases import Decision
from shared.engines import EngineManifest

_RETRIES = 5


class EngineStoreDb(SessionStore):
    """The ``engines``, ``engine_tunings`` and ``build_leases`` tables."""

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

    def manifests_of(self, key: str) -> list[EngineManifest]:
        """Every manifest stored under engine ``key`` (one per tuning tag), oldest first."""
        with self._tx() as session:
            rows = session.execute(
                select(EngineTuning)
                .where(EngineTuning.engine_key == key)
                .order_by(EngineTuning.created_at, EngineTuning.tuning)
            ).scalars()
            return [EngineManifest.model_validate(r.manifest) for r in rows]

    def manifest(self, key: str, tuning: str) -> EngineManifest | None:
        """The manifest stored under (``key``, ``tuning``), if any."""
        with self._tx() as session:
            row = session.get(EngineTuning, (key, tuning))
            return None if row is None else EngineManifest.model_validate(row.manifest)

    def manifests(self) -> list[EngineManifest]:
        """Every stored manifest, one per (engine key, tuning tag), oldest first."""
        with self._tx() as session:
            rows = session.execute(
                select(EngineTuning).order_by(
                    EngineTuning.created_at, EngineTuning.engine_key, EngineTuning.tuning
                )
            ).scalars()
            return [EngineManifest.model_validate(r.manifest) for r in rows]

    def put_manifest(self, manifest: EngineManifest, tuning: str) -> bool:
        """Store ``manifest`` under its ``tuning`` tag and release that build lease; False when
        the same one was stored.

        A different manifest under the same (engine key, tuning) is a :class:`Conflict`.
        """
        key = manifest.engine_key
        dumped = manifest.model_dump(mode="json")
        for _ in range(_RETRIES):
            try:
                with self._tx() as session:
                    row = session.get(EngineTuning, (key, tuning))
                    if row is not None:
                        _same_or_conflict(EngineManifest.model_validate(row.manifest), manifest)
                        return False
                    if session.get(Artifact, manifest.sha256) is None:
                        session.add(Artifact(sha256=manifest.sha256, size=manifest.size))
                    now = utcnow()
                    if session.get(EngineRecord, key) is None:
                        session.add(
                            EngineRecord(
                                engine_key=key,
                                sha256=manifest.sha256,
                                size=manifest.size,
                                built_by=manifest.built_by,
                                manifest=dumped,
                                created_at=now,
                            )
                        )
                        session.flush()
                    session.add(
                        EngineTuning(
                            engine_key=key,
                            tuning=tuning,
                            sha256=manifest.sha256,
                            size=manifest.size,
                            built_by=manifest.built_by,
                            manifest=dumped,
                            created_at=now,
                        )
                    )
                    session.execute(
                        delete(BuildLease).where(
                            BuildLease.engine_key == key, BuildLease.tuning == tuning
                        )
                    )
                return True
            except IntegrityError:
                continue  # stored concurrently: compare with the winner
        raise DatabaseError(f"could not store engine {key} ({tuning}): retry the upload")

    def acquire_lease(
        self, key: str, device_id: str, ttl_s: float, now: datetime, tuning: str = "default"
    ) -> Decision:
        """Grant or deny the build lease of (``key``, ``tuning``) to ``device_id`` (atomic; see
        the module)."""
        for _ in range(_RETRIES):
            try:
                with self._tx() as session:
                    return decide_locked(
                        session,
                        sqlite=self._sqlite,
                        model=BuildLease,
                        key=(key, tuning),
                        holder=device_id,
                        ttl_s=ttl_s,
                        now=now,
                        new_row=lambda lease: BuildLease(
                            engine_key=key,
                            tuning=tuning,
                            holder=lease.holder,
                            expires_at=lease.expires_at,
                        ),
                    )
            except IntegrityError:
                continue  # another device inserted the first lease: decide again against it
        raise DatabaseError(f"could not decide the build lease of {key} ({tuning}): retry")

    def release_lease(self, key: str, device_id: str, tuning: str = "default") -> None:
        """Drop ``device_id``'s lease of (``key``, ``tuning``) (nothing when it holds none)."""
        with self._tx() as session:
            session.execute(
                delete(BuildLease).where(
                    BuildLease.engine_key == key,
                    BuildLease.tuning == tuning,
                    BuildLease.holder == device_id,
                )
            )


def _same_or_conflict(stored: EngineManifest, new: EngineManifest) -> None:
    if stored != new:
        raise Conflict(
            f"engine {new.engine_key} ({new.tuning.label()}) is already stored with another "
            f"manifest (built by "
            f"{stored.built_by}, sha256 {stored.sha256[:12]}…): GET it instead of uploading"
        )
