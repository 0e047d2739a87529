"""Engine manifests and build leases in the database, one transaction per method.

Manifests and leases are kept per (engine key, tuning tag): an engine built in one power mode is
valid in another, only tuned for other clocks, so twins in each power mode share their own build.
Each manifest row records its provenance (who uploaded it, the uploading device's hardware class,
an operator's approval), and ``engine_trust`` the trust mode per class
(:mod:`controller.trust.engine_trust` decides what they mean). Whether an upload may replace a
stored build is decided under that build's row lock (:func:`controller.records.may_replace`).

A lease request runs :func:`controller.records.decide_lease` inside a transaction that holds
the lease row's write lock (:mod:`controller.db.lease_rows`): ``BEGIN IMMEDIATE`` on SQLite (one
writer at a time), ``SELECT ... FOR UPDATE`` on PostgreSQL. When no row exists yet, two first
requests both insert and the primary key lets one commit; the other retries and then sees (and
is denied by) the winner's lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from controller.db.device_store import parse_facts
from controller.db.lease_rows import decide_locked
from controller.db.schema import (
    Artifact,
    BuildLease,
    Device,
    EngineFailure,
    EngineRecord,
    EngineTrust,
    EngineTuning,
    utcnow,
)
from controller.db.session import SessionStore
from controller.errors import Conflict, NotFound
from controller.records import (
    UNRECORDED,
    Decision,
    Provenance,
    TrustEntry,
    TrustMode,
    UploaderKind,
    check_mode,
    may_replace,
)
from shared.engines import BuildFailureOut, EngineManifest
from shared.messages import DeviceFacts

_UPLOADERS: dict[str, UploaderKind] = {"device": "device", "operator": "operator"}


@dataclass(frozen=True)
class StoredEngine:
    """One stored manifest and who put it there."""

    manifest: EngineManifest
    provenance: Provenance


class EngineStoreDb(SessionStore):
    """The ``engines``, ``engine_tunings``, ``engine_trust`` and ``build_leases`` tables."""

    def device_facts(self, device_id: str) -> tuple[DeviceFacts | None, str | None]:
        """The facts ``device_id`` last reported (None before its first report, or when the
        stored facts no longer validate against the wire model) and its pinned hardware class
        (None before its first report)."""
        with self._tx() as session:
            device = session.get(Device, device_id)
            stored = None if device is None else device.facts
            pinned = None if device is None else device.pinned_class
        return parse_facts(stored), pinned

    def stored_of(self, key: str) -> list[StoredEngine]:
        """Every build stored under engine ``key`` with its provenance, oldest first."""
        with self._tx() as session:
            rows = session.execute(
                select(EngineTuning)
                .where(EngineTuning.engine_key == key)
                .order_by(EngineTuning.created_at, EngineTuning.tuning)
            ).scalars()
            return [_stored(r) for r in rows]

    def stored(self) -> list[StoredEngine]:
        """Every stored build with its provenance, one per (engine key, tuning), oldest first."""
        with self._tx() as session:
            rows = session.execute(
                select(EngineTuning).order_by(
                    EngineTuning.created_at, EngineTuning.engine_key, EngineTuning.tuning
                )
            ).scalars()
            return [_stored(r) for r in rows]

    def approve(self, key: str, tuning: str, by: str, now: datetime) -> StoredEngine:
        """Record that operator ``by`` approved the build of (``key``, ``tuning``) for twins
        (an approved one keeps its first approval)."""
        with self._tx() as session:
            row = session.get(EngineTuning, (key, tuning), with_for_update=True)
            if row is None:
                raise NotFound(f"no engine {key} is stored under tuning {tuning!r}")
            if row.approved_by is None:
                row.approved_by = by
                row.approved_at = now
            return _stored(row)

    def trust_entries(self) -> list[TrustEntry]:
        """The trust mode set per hardware class (and for ``default``), by class."""
        with self._tx() as session:
            rows = session.execute(select(EngineTrust).order_by(EngineTrust.hardware_class))
            return [_trust(r) for r in rows.scalars()]

    def set_trust(self, hw_class: str, mode: TrustMode, by: str, now: datetime) -> TrustEntry:
        """Set the trust mode of ``hw_class`` (replacing its previous one)."""

        def write(session: Session) -> TrustEntry:
            row = session.get(EngineTrust, hw_class, with_for_update=True)
            if row is None:
                row = EngineTrust(hardware_class=hw_class)
                session.add(row)
            row.mode, row.set_by, row.set_at = mode, by, now
            session.flush()
            return _trust(row)

        # run again when it was set concurrently for the first time: update the winner's row
        return self._tx_retried(write, f"could not set the engine trust of {hw_class}: retry")

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
        return [s.manifest for s in self.stored_of(key)]

    def manifest(self, key: str, tuning: str) -> EngineManifest | None:
        """The manifest stored under (``key``, ``tuning``), if any."""
        with self._tx() as session:
            row = session.get(EngineTuning, (key, tuning))
            return None if row is None else EngineManifest.model_validate(row.manifest)

    def manifests(self) -> list[EngineManifest]:
        """Every stored manifest, one per (engine key, tuning tag), oldest first."""
        return [s.manifest for s in self.stored()]

    def put_manifest(
        self, manifest: EngineManifest, tuning: str, provenance: Provenance = UNRECORDED
    ) -> bool:
        """Store ``manifest`` under its ``tuning`` tag, uploaded as ``provenance`` says, and
        release that build lease; False when the same one was stored.

        A different manifest under the same (engine key, tuning) is a :class:`Conflict`, unless
        :func:`~controller.records.may_replace` lets this upload replace it.
        """
        key = manifest.engine_key
        dumped = manifest.model_dump(mode="json")

        def store(session: Session) -> bool:
            row = session.get(EngineTuning, (key, tuning), with_for_update=True)
            if row is not None:
                stored = _stored(row)
                if stored.manifest == manifest:
                    return False
                if not may_replace(stored.provenance, provenance):
                    raise _conflict(stored, manifest)
            if session.get(Artifact, manifest.sha256) is None:
                session.add(Artifact(sha256=manifest.sha256, size=manifest.size))
            now = utcnow()
            if row is not None:
                _write(row, manifest, dumped, provenance, now)
                _release_lease(session, key, tuning)
                return True
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
            row = EngineTuning(engine_key=key, tuning=tuning)
            _write(row, manifest, dumped, provenance, now)
            session.add(row)
            _release_lease(session, key, tuning)
            return True

        # run again when it was stored concurrently: compare with the winner
        return self._tx_retried(store, f"could not store engine {key} ({tuning}): retry the upload")

    def acquire_lease(
        self, key: str, device_id: str, ttl_s: float, now: datetime, tuning: str = "default"
    ) -> Decision:
        """Grant or deny the build lease of (``key``, ``tuning``) to ``device_id`` (atomic; see
        the module)."""

        def decide(session: Session) -> Decision:
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

        # run again when another device inserted the first lease: decide against it
        return self._tx_retried(
            decide, f"could not decide the build lease of {key} ({tuning}): retry"
        )

    def put_failure(self, failure: BuildFailureOut) -> None:
        """Remember that TensorRT could not build ``failure.engine_key`` (the latest report
        replaces an earlier one)."""
        with self._tx() as session:
            row = session.get(EngineFailure, failure.engine_key) or EngineFailure(
                engine_key=failure.engine_key
            )
            row.device_id, row.reason = failure.device_id, failure.reason
            row.failed_at = failure.failed_at
            session.add(row)

    def failure(self, key: str) -> BuildFailureOut | None:
        """The remembered failure of engine ``key``, if any."""
        with self._tx() as session:
            row = session.get(EngineFailure, key)
            if row is None:
                return None
            return BuildFailureOut(
                engine_key=row.engine_key,
                device_id=row.device_id,
                reason=row.reason,
                failed_at=row.failed_at,
            )

    def forget_failure(self, key: str) -> bool:
        """Forget the failure of ``key``; False when none was remembered."""
        with self._tx() as session:
            gone = session.execute(delete(EngineFailure).where(EngineFailure.engine_key == key))
            return bool(getattr(gone, "rowcount", 0))

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


def _conflict(stored: StoredEngine, new: EngineManifest) -> Conflict:
    return Conflict(
        f"engine {new.engine_key} ({new.tuning.label()}) is already stored with another "
        f"manifest (built by {stored.manifest.built_by}, sha256 {stored.manifest.sha256[:12]}…): "
        "GET it instead of uploading"
    )


def _write(
    row: EngineTuning,
    manifest: EngineManifest,
    dumped: dict[str, Any],
    provenance: Provenance,
    now: datetime,
) -> None:
    row.sha256, row.size, row.built_by = manifest.sha256, manifest.size, manifest.built_by
    row.manifest, row.created_at = dumped, now
    row.uploader, row.uploaded_by = provenance.uploader, provenance.uploaded_by
    row.hardware_class = provenance.hardware_class
    row.approved_by, row.approved_at = provenance.approved_by, provenance.approved_at


def _release_lease(session: Session, key: str, tuning: str) -> None:
    session.execute(
        delete(BuildLease).where(BuildLease.engine_key == key, BuildLease.tuning == tuning)
    )


def _stored(row: EngineTuning) -> StoredEngine:
    return StoredEngine(
        manifest=EngineManifest.model_validate(row.manifest),
        provenance=Provenance(
            uploader=_UPLOADERS.get(row.uploader, "unknown"),
            uploaded_by=row.uploaded_by,
            hardware_class=row.hardware_class,
            approved_by=row.approved_by,
            approved_at=row.approved_at,
        ),
    )


def _trust(row: EngineTrust) -> TrustEntry:
    return TrustEntry(row.hardware_class, check_mode(row.mode), row.set_by, row.set_at)
