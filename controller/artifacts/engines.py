"""The engine store: artifact uploads, engine manifests and build leases.

Engine keys and tuning tags: docs/architecture.md#engine-identity.

Agents upload a built engine's bytes (``POST /api/v1/artifacts``), then its manifest
(``PUT /api/v1/engines/{key}``); twins ``GET`` the manifest and download the artifact instead of
building. Before building, an agent asks for the key's build lease so only one twin builds.

Manifests and leases are per (engine key, tuning tag), the tag being ``TuningTag.label()`` of
the manifest (``15W``, ``MAXN+clocks``, ``default``): a device re-tuning for its power mode
builds under its own conditions and uploads, and its twins in that power mode pull that build.
``GET /api/v1/engines/{key}?tuning=TAG`` answers the manifest tuned under ``TAG`` when stored,
else another tuning of the same (valid) engine, and says which (:func:`best_manifest`).

Who may store a build and which builds a device gets are :mod:`controller.trust.engine_trust`'s
decisions: a device uploads only for its own validity, and its twins get its build only when its
class trusts device builds or an operator approved it; a device asking for a build it may not
pull gets 404 (and a build lease at once), so it builds its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from controller.artifacts.device_quota import DeviceUploadQuota
from controller.artifacts.store import ArtifactStore, PendingArtifact
from controller.db.engine_store import EngineStoreDb, StoredEngine
from controller.db.schema import utcnow
from controller.errors import Forbidden, InvalidInput, NotFound
from controller.trust.engine_trust import (
    DEFAULT_TRUST,
    FLEET_DEFAULT,
    EngineStatus,
    Provenance,
    TrustEntry,
    TrustMode,
    Uploader,
    check_class,
    check_upload,
    may_pull,
    provenance_of,
    status,
    trust_mode,
)
from controller.trust.signing import FleetSigner
from shared.canonical import is_sha256_hex
from shared.engine_keys import MAX_TUNING, TUNING_PATTERN, engine_key
from shared.engines import (
    ArtifactOut,
    BuildFailure,
    BuildFailureOut,
    EngineManifest,
    LeaseOut,
    LeaseRequest,
)
from shared.facts import DeviceFacts
from shared.topics import TopicError, check_device_id

TuningMatch = Literal["exact", "other", "any"]
"""How a returned manifest relates to the asked tuning: tuned under it, under another one (no
build for the asked tuning is stored yet), or no tuning was asked."""

_TUNING = re.compile(TUNING_PATTERN)


def best_manifest(
    manifests: Sequence[EngineManifest], tuning: str | None
) -> tuple[EngineManifest, TuningMatch] | None:
    """The manifest to answer for ``tuning`` among one engine key's manifests (oldest first).

    Tuned under ``tuning`` when there is one; else the oldest stored (the most pulled, so the
    likeliest to be cached on twins); None when ``manifests`` is empty.
    """
    if not manifests:
        return None
    if tuning is None:
        return manifests[0], "any"
    for m in manifests:
        if m.tuning.label() == tuning:
            return m, "exact"
    return manifests[0], "other"


@dataclass(frozen=True)
class EngineEntry:
    """A stored build as operators see it: manifest, provenance, its class's trust mode and
    whether twins get it."""

    manifest: EngineManifest
    provenance: Provenance
    mode: TrustMode
    status: EngineStatus


class EngineStore:
    """Artifacts, engine manifests and build leases, over the database and the artifact store."""

    def __init__(
        self,
        db: EngineStoreDb,
        store: ArtifactStore,
        clock: Callable[[], datetime] = utcnow,
        signer: FleetSigner | None = None,
    ) -> None:
        self._db = db
        self._store = store
        self._clock = clock
        self._signer = signer
        self.quota = DeviceUploadQuota()

    # --- artifacts -------------------------------------------------------------------------

    def begin_upload(self, device_id: str | None = None) -> PendingArtifact:
        """A temporary file in the store to stream an artifact upload into; a device's upload
        is counted against its quota as it arrives (:mod:`controller.artifacts.device_quota`)."""
        pending = self._store.begin()
        if device_id is not None:
            pending.on_write = lambda size: self.quota.charge(device_id, size)
        return pending

    def finish_upload(
        self, pending: PendingArtifact, expected_sha256: str | None
    ) -> tuple[ArtifactOut, bool]:
        """Verify and store a streamed artifact; (artifact, True when newly stored)."""
        committed = False
        try:
            sha = pending.finish()
            if expected_sha256 is not None and expected_sha256 != sha:
                raise InvalidInput(
                    f"artifact bytes have sha256 {sha}, not {expected_sha256} as the query says: "
                    "the upload was truncated or altered; send it again"
                )
            existed = self._store.contains(sha)
            stored = pending.commit()
            committed = True
            self._db.add_artifact(stored.sha256, stored.size)
            return ArtifactOut(sha256=stored.sha256, size=stored.size), not existed
        finally:
            if not committed:
                pending.abort()

    # --- manifests -------------------------------------------------------------------------

    def put(
        self, key: str, manifest: EngineManifest, uploader: Uploader
    ) -> tuple[EngineManifest, bool]:
        """Store the manifest of engine ``key`` sent by ``uploader``; (manifest, True when newly
        stored).

        Refuses (403) a device's manifest for a validity that is not its own (or any before it
        reported facts), see :func:`~controller.trust.engine_trust.check_upload`; (400) a manifest
        whose key is not ``key`` or not the engine key of its own validity and content, or whose
        artifact is missing or of another size; 409 when another manifest is stored under
        ``key`` and the same tuning tag (an operator may replace a device's unapproved build).
        Storing it releases that (key, tuning) build lease. The fleet key signs what is stored
        (a ``signed`` field in the request is ignored).
        """
        manifest = manifest.model_copy(update={"signed": None})
        facts, pinned = self._facts(uploader)
        decision = check_upload(uploader, manifest.validity, facts, pinned)
        if not decision.allowed:
            raise Forbidden(decision.reason)
        if manifest.engine_key != key:
            raise InvalidInput(
                f"manifest engine_key {manifest.engine_key} differs from the URL key {key}: "
                "PUT it to /api/v1/engines/<its engine_key>"
            )
        computed = engine_key(manifest.validity, manifest.content)
        if computed != key:
            raise InvalidInput(
                f"engine_key {key} is not the key of the manifest's validity and content "
                f"({computed}): compute it with shared.engine_keys.engine_key"
            )
        try:
            artifact = self._store.get(manifest.sha256)
        except NotFound as exc:
            raise InvalidInput(
                f"artifact {manifest.sha256} is not stored: POST the engine bytes to "
                "/api/v1/artifacts before its manifest"
            ) from exc
        if artifact.size != manifest.size:
            raise InvalidInput(
                f"manifest size {manifest.size} differs from the stored artifact's "
                f"{artifact.size} bytes (sha256 {manifest.sha256})"
            )
        tuning = _check_tuning(manifest.tuning.label())
        created = self._db.put_manifest(manifest, tuning, provenance_of(uploader, decision))
        stored = self._db.manifest(key, tuning)
        assert stored is not None
        return self._signed(stored), created

    def _facts(self, uploader: Uploader) -> tuple[DeviceFacts | None, str | None]:
        """The facts an uploading device last reported (None for operators, before any, or when
        the stored ones are unreadable) and the hardware class it is pinned to."""
        if uploader.kind != "device":
            return None, None
        return self._db.device_facts(uploader.name)

    def get(
        self, key: str, tuning: str | None = None, device_id: str | None = None
    ) -> tuple[EngineManifest, TuningMatch]:
        """The manifest of engine ``key`` best tuned for ``tuning`` (see :func:`best_manifest`)
        among those device ``device_id`` may pull (None: an operator, who sees all), and how it
        matches, or :class:`NotFound`."""
        _check_key(key)
        if tuning is not None:
            _check_tuning(tuning)
        stored = self._db.stored_of(key)
        modes = self._modes()
        pullable = [
            s.manifest
            for s in stored
            if may_pull(device_id, s.provenance, trust_mode(modes, s.provenance.hardware_class))
        ]
        best = best_manifest(pullable, tuning)
        if best is None and stored:
            builders = ", ".join(sorted({s.manifest.built_by for s in stored}))
            raise NotFound(
                f"engine {key} is not shared with device {device_id} yet: the build of "
                f"{builders} awaits an operator's approval (`jetfleet engines approve "
                f"{key[:12]}`); build it here"
            )
        if best is None:
            raise NotFound(f"no engine {key} is stored (build it, or ask for its build lease)")
        return self._signed(best[0]), best[1]

    def _signed(self, manifest: EngineManifest) -> EngineManifest:
        """``manifest`` with its signed manifest (signed now when missing or stale)."""
        if self._signer is None:
            return manifest
        return manifest.model_copy(update={"signed": self._signer.engine_manifest(manifest)})

    def entries(self) -> list[EngineEntry]:
        """Every stored build with who uploaded it and whether twins get it, one per (engine
        key, tuning tag), oldest first."""
        modes = self._modes()
        return [self._entry(s, modes) for s in self._db.stored()]

    # --- trust -----------------------------------------------------------------------------

    def _modes(self) -> dict[str, TrustMode]:
        return {t.hardware_class: t.mode for t in self._db.trust_entries()}

    def _entry(self, stored: StoredEngine, modes: dict[str, TrustMode]) -> EngineEntry:
        mode = trust_mode(modes, stored.provenance.hardware_class)
        return EngineEntry(
            stored.manifest, stored.provenance, mode, status(stored.provenance, mode)
        )

    def approve(self, key: str, tuning: str | None, by: str) -> EngineEntry:
        """Share the device build of (``key``, ``tuning``) with its twins, approved by operator
        ``by``; ``tuning`` None when ``key`` is stored under one tuning only."""
        _check_key(key)
        stored = self._db.stored_of(key)
        if not stored:
            raise NotFound(f"no engine {key} is stored (see `jetfleet engines ls`)")
        if tuning is None:
            tunings = [s.manifest.tuning.label() for s in stored]
            if len(tunings) > 1:
                raise InvalidInput(
                    f"engine {key} is stored under {len(tunings)} tunings "
                    f"({', '.join(tunings)}): name the one to approve (--tuning TAG)"
                )
            tuning = tunings[0]
        approved = self._db.approve(key, _check_tuning(tuning), by, self._clock())
        return self._entry(approved, self._modes())

    def trust(self) -> list[TrustEntry]:
        """The trust mode per hardware class, the fleet default first (built in when unset)."""
        entries = self._db.trust_entries()
        default = [t for t in entries if t.hardware_class == FLEET_DEFAULT] or [
            TrustEntry(FLEET_DEFAULT, DEFAULT_TRUST, None, None)
        ]
        return default + [t for t in entries if t.hardware_class != FLEET_DEFAULT]

    def set_trust(self, hw_class: str, mode: TrustMode, by: str) -> TrustEntry:
        """Whether twins of ``hw_class`` (or of every class without its own setting, for
        ``default``) get device builds at once (``devices``) or after approval."""
        return self._db.set_trust(check_class(hw_class), mode, by, self._clock())

    # --- leases ----------------------------------------------------------------------------

    def lease(self, key: str, request: LeaseRequest) -> LeaseOut:
        """Grant the build lease of (``key``, the request's tuning) (or renew the caller's), or
        say who holds it. Leases of other tunings of ``key`` do not matter.

        A device asking while a build of that (key, tuning) is stored that it may not pull (one
        pending approval) is granted at once and without excluding anyone: it builds its own,
        and so may each of its twins, instead of queueing behind a lease for a build they would
        not get either.
        """
        _check_key(key)
        _check_device(request.device_id)
        _check_tuning(request.tuning)
        if self._not_shared_with(key, request):
            return LeaseOut(
                engine_key=key,
                tuning=request.tuning,
                granted=True,
                holder=request.device_id,
                expires_at=self._clock() + timedelta(seconds=request.ttl_s),
            )
        decision = self._db.acquire_lease(
            key, request.device_id, request.ttl_s, self._clock(), request.tuning
        )
        return LeaseOut(
            engine_key=key,
            tuning=request.tuning,
            granted=decision.granted,
            holder=decision.lease.holder,
            expires_at=decision.lease.expires_at,
        )

    def _not_shared_with(self, key: str, request: LeaseRequest) -> bool:
        modes = self._modes()
        return any(
            not may_pull(
                request.device_id, s.provenance, trust_mode(modes, s.provenance.hardware_class)
            )
            for s in self._db.stored_of(key)
            if s.manifest.tuning.label() == request.tuning
        )

    # --- failed builds, remembered per engine key ---------------------------------------------

    def report_failure(self, key: str, report: BuildFailure, uploader: Uploader) -> BuildFailureOut:
        """Remember that TensorRT could not build ``key``. A device reports only for its own
        validity and class (the rule of :meth:`put`); the key must be that of the report's
        validity and content, and a TensorRT one (ONNX Runtime has nothing to fall back to)."""
        _check_key(key)
        if report.validity.runtime != "tensorrt":
            raise InvalidInput("only TensorRT builds fall back: the validity's runtime is not it")
        facts, pinned = self._facts(uploader)
        decision = check_upload(uploader, report.validity, facts, pinned)
        if not decision.allowed:
            raise Forbidden(decision.reason)
        computed = engine_key(report.validity, report.content)
        if computed != key:
            raise InvalidInput(
                f"engine key {key} is not the key of the report's validity and content ({computed})"
            )
        failure = BuildFailureOut(
            engine_key=key,
            device_id=report.device_id,
            reason=report.reason,
            failed_at=self._clock(),
        )
        self._db.put_failure(failure)
        return failure

    def failure(self, key: str) -> BuildFailureOut:
        """The remembered failure of ``key``; NotFound when TensorRT is not known to fail it."""
        _check_key(key)
        found = self._db.failure(key)
        if found is None:
            raise NotFound(f"no failed build of engine {key[:12]} is remembered")
        return found

    def forget_failure(self, key: str) -> None:
        """Forget the failure of ``key`` (its twins try TensorRT again); NotFound when none."""
        _check_key(key)
        if not self._db.forget_failure(key):
            raise NotFound(f"no failed build of engine {key[:12]} is remembered")

    def release(self, key: str, device_id: str, tuning: str = "default") -> None:
        """Release ``device_id``'s lease of (``key``, ``tuning``) (idempotent)."""
        _check_key(key)
        _check_device(device_id)
        self._db.release_lease(key, device_id, _check_tuning(tuning))


def _check_key(key: str) -> None:
    if not is_sha256_hex(key):
        raise InvalidInput(f"invalid engine key {key!r}: expected 64 lower-case hex digits")


def _check_device(device_id: str) -> None:
    try:
        check_device_id(device_id)
    except TopicError as exc:
        raise InvalidInput(str(exc)) from exc


def _check_tuning(tuning: str) -> str:
    if not _TUNING.fullmatch(tuning):
        raise InvalidInput(
            f"invalid tuning tag {tuning[:40]!r}: expected 1 to {MAX_TUNING} printable ASCII "
            "characters, the TuningTag.label() of a power mode (e.g. 15W, MAXN+clocks, default)"
        )
    return tuning
