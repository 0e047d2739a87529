"""The artifact store: content-addressed bytes over a backend (:mod:`.backend`).

Uploads stream into a local temporary file while being hashed; only a complete, verified file
is stored under its key ``artifacts/<sha[:2]>/<sha>``, and bytes already stored are not stored
twice. A reader never sees a half-written artifact. An upload larger than the store's
``max_upload_bytes`` is refused while it streams: the write that would cross the bound raises
:class:`UploadTooLarge` and nothing of it stays once the caller aborts.

Two backends. The filesystem (default): ``<data-dir>/artifacts/<sha[:2]>/<sha>``, the temporary
file renamed into place atomically (also right on a mount the replicas share). An S3-compatible
bucket (``--artifact-store s3://...``, :mod:`controller.artifacts.s3`) for replicas that share
no disk: a verified upload is PUT (or sent in parts) under its key and kept in this replica's
bounded :class:`~controller.artifacts.local_cache.LocalCache`, which also gives the readers that
need a file (analysis, reference outputs) a verified local copy (:meth:`ArtifactStore.local_path`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from controller.artifacts.backend import (
    Backend,
    FileBackend,
    artifact_key,
    document_key,
    read_range,
)
from controller.artifacts.local_cache import TEMP_PREFIX, LocalCache
from controller.errors import InvalidInput, NotFound, StorageError
from controller.settings import DEFAULT_ARTIFACT_CACHE_BYTES, DEFAULT_MAX_UPLOAD_BYTES, Settings


class UploadTooLarge(InvalidInput):
    """An upload (model, artifact, reference outputs) bigger than the configured bound (413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"upload larger than the controller's limit of {limit} bytes: nothing was stored; "
            "start `jetfleet serve` with a larger --max-upload if the file is right"
        )
        self.limit = limit


def check_upload_size(size: int, limit: int) -> None:
    """:class:`UploadTooLarge` when ``size`` bytes exceed ``limit``."""
    if size > limit:
        raise UploadTooLarge(limit)


@dataclass(frozen=True)
class StoredArtifact:
    """An artifact in the store."""

    sha256: str
    size: int


class PendingArtifact:
    """An upload in progress: a local temporary file being written and hashed."""

    def __init__(self, store: ArtifactStore) -> None:
        self._store = store
        fd, name = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}upload-", dir=store.root)
        self.path = Path(name)
        self._file: BinaryIO = os.fdopen(fd, "wb")
        self._hash = hashlib.sha256()
        self.size = 0
        self._closed = False
        self.on_write: Callable[[int], None] | None = None
        """Called with each chunk's size before it is written (a device's quota); raises to
        refuse it."""

    def write(self, chunk: bytes) -> None:
        """Append ``chunk`` to the upload; :class:`UploadTooLarge` past the store's bound."""
        check_upload_size(self.size + len(chunk), self._store.max_upload_bytes)
        if self.on_write is not None:
            self.on_write(len(chunk))
        self._file.write(chunk)
        self._hash.update(chunk)
        self.size += len(chunk)

    def finish(self) -> str:
        """Flush and fsync the temporary file; return the sha256 of everything written."""
        if not self._closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._closed = True
        return self._hash.hexdigest()

    def replace(self, data: bytes) -> str:
        """Make ``data`` the upload's content (an archive inlined into one model); its sha256."""
        self.finish()
        check_upload_size(len(data), self._store.max_upload_bytes)
        with open(self.path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        self._hash = hashlib.sha256(data)
        self.size = len(data)
        return self._hash.hexdigest()

    def commit(self) -> StoredArtifact:
        """Store the upload under its sha256 (or drop it when those bytes are already stored)."""
        sha = self.finish()
        self._store.keep(sha, self.path, self.size)
        return StoredArtifact(sha256=sha, size=self.size)

    def abort(self) -> None:
        """Throw the upload away; nothing of it stays on disk or in the store."""
        if not self._closed:
            self._file.close()
            self._closed = True
        self.path.unlink(missing_ok=True)


class ArtifactStore:
    """The artifacts of one controller: in ``<data_dir>/artifacts`` (``backend`` None), or in
    ``backend`` with ``<data_dir>/artifact-cache`` (at most ``cache_bytes``) as local copies.

    ``redirect_s`` > 0: :meth:`presigned_url` hands out URLs of the backend valid that long.
    """

    def __init__(
        self,
        data_dir: Path,
        max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
        backend: Backend | None = None,
        *,
        cache_bytes: int = DEFAULT_ARTIFACT_CACHE_BYTES,
        redirect_s: int = 0,
    ) -> None:
        if max_upload_bytes <= 0:
            raise InvalidInput(f"max_upload_bytes must be positive, got {max_upload_bytes}")
        self.max_upload_bytes = max_upload_bytes
        self.redirect_s = redirect_s
        self._cache: LocalCache | None = None
        if backend is None:
            self.backend: Backend = FileBackend(data_dir)
            self.root = data_dir / "artifacts"
            self.root.mkdir(parents=True, exist_ok=True)
        else:
            self.backend = backend
            self._cache = LocalCache(data_dir / "artifact-cache", cache_bytes)
            self.root = self._cache.root
        self.label = self.backend.label

    def check(self) -> None:
        """At start: StorageError naming the fix when the backend cannot be used."""
        self.backend.check()

    def begin(self) -> PendingArtifact:
        """Start an upload."""
        return PendingArtifact(self)

    def keep(self, sha256: str, file: Path, size: int) -> None:
        """Store the verified local ``file`` as artifact ``sha256`` (the file is used up)."""
        key = artifact_key(sha256)
        if self._cache is None:
            self.backend.put_file(key, file, size)
            return
        if self.backend.size(key) is None:
            self.backend.put_file(key, file, size)
        self._cache.keep(sha256, file)

    def get(self, sha256: str) -> StoredArtifact:
        """The stored artifact ``sha256``, or :class:`NotFound`."""
        key = artifact_key(sha256)
        cached = self._cached(sha256)
        size = cached.stat().st_size if cached is not None else self.backend.size(key)
        if size is None:
            raise NotFound(f"unknown artifact {sha256}")
        return StoredArtifact(sha256=sha256, size=size)

    def contains(self, sha256: str) -> bool:
        """True when the bytes of ``sha256`` are stored."""
        try:
            self.get(sha256)
        except NotFound:
            return False
        return True

    def open_range(self, sha256: str, start: int, end: int) -> Iterator[bytes]:
        """Bytes ``start..end`` (inclusive) of artifact ``sha256``, streamed (from this
        replica's local copy when it has one); NotFound or StorageError before the first."""
        cached = self._cached(sha256)
        if cached is not None:
            try:
                return read_range(cached.open("rb"), start, end)
            except FileNotFoundError:
                pass  # evicted just now: read the backend's
        return self.backend.open_range(artifact_key(sha256), start, end)

    def local_path(self, sha256: str) -> Path:
        """A local file holding artifact ``sha256`` for readers that need a file (child
        processes): the stored file itself, or a verified copy in the local cache; NotFound."""
        key = artifact_key(sha256)
        if self._cache is None:
            path = self.backend.local_file(key)
            if path is None or not path.is_file():
                raise NotFound(f"unknown artifact {sha256}")
            return path
        cached = self._cache.hit(sha256)
        if cached is not None:
            return cached
        return self._cache.fill(sha256, lambda write: self.backend.fetch(key, write))

    def presigned_url(self, sha256: str) -> str | None:
        """A URL of the backend agents may GET ``sha256`` from (``redirect_s`` > 0 and the
        backend presigns), else None: this replica serves the bytes itself."""
        if self.redirect_s <= 0:
            return None
        return self.backend.presign(artifact_key(sha256), self.redirect_s)

    def write_document(self, name: str, data: bytes) -> None:
        """Store (or replace) the small document ``name`` (``references/<sha>.json``)."""
        self.backend.put_bytes(document_key(name), data)

    def read_document(self, name: str) -> bytes | None:
        """The small document ``name``, or None."""
        return self.backend.get_bytes(document_key(name))

    def _cached(self, sha256: str) -> Path | None:
        if self._cache is None:
            return None
        artifact_key(sha256)
        return self._cache.hit(sha256)


def open_store(settings: Settings) -> ArtifactStore:
    """The artifact store ``settings`` choose: the data directory, or the S3 bucket of
    ``settings.object_store`` (boto3 is imported only then). Call :meth:`ArtifactStore.check`."""
    chosen = settings.object_store
    if chosen is None:
        return ArtifactStore(settings.data_dir, max_upload_bytes=settings.max_upload_bytes)
    try:
        from controller.artifacts.s3 import S3Backend
    except ImportError as exc:
        raise StorageError(
            f"--artifact-store {chosen.url} needs boto3, which is missing: "
            "pip install 'jetfleet[controller]'"
        ) from exc
    return ArtifactStore(
        settings.data_dir,
        max_upload_bytes=settings.max_upload_bytes,
        backend=S3Backend(chosen),
        cache_bytes=chosen.cache_bytes,
        redirect_s=chosen.redirect_s,
    )
