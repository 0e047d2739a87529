"""The engine store: artifact uploads, engine manifests and build leases (ARCHITECTURE.md §4).

Agents upload a built engine's bytes (``POST /api/v1/artifacts``), then its manifest
(``PUT /api/v1/engines/{key}``); twins ``GET`` the manifest and download the artifact instead of
building. Before building, an agent asks for the key's build lease so only one twin builds.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from controller.artifacts import ArtifactStore, PendingArtifact
from controller.db.engine_store import EngineStoreDb
from controller.db.schema import utcnow
from controller.errors import InvalidInput, NotFound
from controller.signing import FleetSigner
from shared.canonical import is_sha256_hex
from shared.engine_keys import engine_key
from shared.engines import ArtifactOut, EngineManifest, LeaseOut, LeaseRequest


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
        manifest is stored under ``key``. Storing it releases the key's build lease. The fleet
        key signs what is stored (a ``signed`` field in the request is ignored).
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
        created = self._db.put_manifest(manifest)
        stored = self._db.manifest(key)
        assert stored is not None
        return self._signed(stored), created

    def get(self, key: str) -> EngineManifest:
        """The manifest of engine ``key``, or :class:`NotFound`."""
        _check_key(key)
        found = self._db.manifest(key)
        if found is None:
            raise NotFound(f"no engine {key} is stored (build it, or ask for its build lease)")
        return self._signed(found)

    def _signed(self, manifest: EngineManifest) -> EngineManifest:
        """``manifest`` with its signed manifest (signed now when missing or stale)."""
        if self._signer is None:
            return manifest
        return manifest.model_copy(update={"signed": self._signer.engine_manifest(manifest)})

    def list(self) -> list[EngineManifest]:
        """Every stored manifest, oldest first."""
        return self._db.manifests()

    # --- leases ----------------------------------------------------------------------------

    def lease(self, key: str, request: LeaseRequest) -> LeaseOut:
        """Grant the build lease of ``key`` (or renew the caller's), or say who holds it."""
        _check_key(key)
        decision = self._db.acquire_lease(key, request.device_id, request.ttl_s, self._clock())
        return LeaseOut(
            engine_key=key,
            granted=decision.granted,
            holder=decision.lease.holder,
            expires_at=decision.lease.expires_at,
        )

    def release(self, key: str, device_id: str) -> None:
        """Release ``device_id``'s lease of ``key`` (idempotent)."""
        _check_key(key)
        self._db.release_lease(key, device_id)


def _check_key(key: str) -> None:
    if not is_sha256_hex(key):
        raise InvalidInput(f"invalid engine key {key!r}: expected 64 lower-case hex digits")
