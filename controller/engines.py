"""The engine store: artifact uploads, engine manifests and build leases (ARCHITECTURE.md §4).

Agents upload a built engine's bytes (``POST /api/v1/artifacts``), then its manifest
(``PUT /api/v1/engines/{key}``); twins ``GET`` the manifest and download the artifact instead of
building. Before building, an agent asks for the key's build lease so only one twin builds.

Manifests and leases are per (engine key, tuning tag), the tag being ``TuningTag.label()`` of
the manifest (``15W``, ``MAXN+clocks``, ``default``): a device re-tuning for its power mode
builds under its own conditions and uploads, and its twins in that power mode pull that build.
``GET /api/v1/engines/{key}?tuning=TAG`` answers the manifest tuned under ``TAG`` when stored,
else another tuning of the same (valid) engine, and says which (:func:`best_manifest`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Literal

from controller.artifacts import ArtifactStore, PendingArtifact
from controller.db.engine_store import EngineStoreDb
from controller.db.schema import utcnow
from controller.errors import InvalidInput, NotFound
from controller.signing import FleetSigner
from shared.canonical import is_sha256_hex
from shared.engine_keys import engine_key
from shared.engines import ArtifactOut, EngineManifest, LeaseOut, LeaseRequest

TuningMatch = Literal["exact", "other", "any"]
"""How a returned manifest relates to the asked tuning: tuned under it, under another one (no
build for the asked tuning is stored yet), or no tuning was asked."""

MAX_TUNING = 128


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

    # --- artifacts -------------------------------------------------------------------------

    def begin_upload(self) -> PendingArtifact:
        """A temporary file in the store to stream an artifact upload into."""
        return self._store.begin()

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

    def put(self, key: str, manifest: EngineManifest) -> tuple[EngineManifest, bool]:
        """Store the manifest of engine ``key``; (manifest, True when newly stored).

        Refuses (400) a manifest whose key is not ``key`` or not the engine key of its own
        validity and content, or whose artifact is missing or of another size; 409 when another
        manifest is stored under ``key`` and the same tuning tag. Storing it releases that
        (key, tuning) build lease. The fleet key signs what is stored (a ``signed`` field in the
        request is ignored).
        """
        manifest = manifest.model_copy(update={"signed": None})
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
        created = self._db.put_manifest(manifest, tuning)
        stored = self._db.manifest(key, tuning)
        assert stored is not None
        return self._signed(stored), created

    def get(self, key: str, tuning: str | None = None) -> tuple[EngineManifest, TuningMatch]:
        """The manifest of engine ``key`` best tuned for ``tuning`` (see :func:`best_manifest`)
        and how it matches, or :class:`NotFound`."""
        _check_key(key)
        if tuning is not None:
            _check_tuning(tuning)
        best = best_manifest(self._db.manifests_of(key), tuning)
        if best is None:
            raise NotFound(f"no engine {key} is stored (build it, or ask for its build lease)")
        return self._signed(best[0]), best[1]

    def _signed(self, manifest: EngineManifest) -> EngineManifest:
        """``manifest`` with its signed manifest (signed now when missing or stale)."""
        if self._signer is None:
            return manifest
        return manifest.model_copy(update={"signed": self._signer.engine_manifest(manifest)})

    def list(self) -> list[EngineManifest]:
        """Every stored manifest, one per (engine key, tuning tag), oldest first."""
        return self._db.manifests()

    # --- leases ----------------------------------------------------------------------------

    def lease(self, key: str, request: LeaseRequest) -> LeaseOut:
        """Grant the build lease of (``key``, the request's tuning) (or renew the caller's), or
        say who holds it. Leases of other tunings of ``key`` do not matter."""
        _check_key(key)
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

    def release(self, key: str, device_id: str, tuning: str = "default") -> None:
        """Release ``device_id``'s lease of (``key``, ``tuning``) (idempotent)."""
        _check_key(key)
        self._db.release_lease(key, device_id, _check_tuning(tuning))


def _check_key(key: str) -> None:
    if not is_sha256_hex(key):
        raise InvalidInput(f"invalid engine key {key!r}: expected 64 lower-case hex digits")


def _check_tuning(tuning: str) -> str:
    if not tuning or len(tuning) > MAX_TUNING or not tuning.isprintable():
        raise InvalidInput(
            f"invalid tuning tag {tuning[:40]!r}: expected 1 to {MAX_TUNING} printable "
            "characters, the TuningTag.label() of a power mode (e.g. 15W, MAXN+clocks, default)"
        )
    return tuning
