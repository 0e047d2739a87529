"""Content-addressed artifact store: ``<data-dir>/artifacts/<sha[:2]>/<sha>``.

Uploads stream into a temporary file next to their final place while being hashed; only a
complete, verified file is renamed into place (atomically), and bytes already stored are not
stored twice. A reader never sees a half-written artifact. An upload larger than the store's
``max_upload_bytes`` is refused while it streams: the write that would cross the bound raises
:class:`UploadTooLarge` and nothing of it stays on disk once the caller aborts.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from controller.errors import InvalidInput, NotFound
from controller.settings import DEFAULT_MAX_UPLOAD_BYTES
from shared.names import InvalidName, check_sha256


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
    path: Path


class PendingArtifact:
    """An upload in progress: a temporary file being written and hashed."""

    def __init__(self, store: ArtifactStore) -> None:
        self._store = store
        fd, name = tempfile.mkstemp(prefix=".upload-", dir=store.root)
        self.path = Path(name)
        self._file: BinaryIO = os.fdopen(fd, "wb")
        self._hash = hashlib.sha256()
        self.size = 0
        self._closed = False

    def write(self, chunk: bytes) -> None:
        """Append ``chunk`` to the upload; :class:`UploadTooLarge` past the store's bound."""
        check_upload_size(self.size + len(chunk), self._store.max_upload_bytes)
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
        """Move the upload into place (or drop it when those bytes are already stored)."""
        sha = self.finish()
        final = self._store.path_of(sha)
        if final.exists():
            self.path.unlink(missing_ok=True)
        else:
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.path, final)
            _fsync_dir(final.parent)
        return StoredArtifact(sha256=sha, size=self.size, path=final)

    def abort(self) -> None:
        """Throw the upload away; nothing of it stays on disk."""
        if not self._closed:
            self._file.close()
            self._closed = True
        self.path.unlink(missing_ok=True)


class ArtifactStore:
    """The artifact directory of one controller."""

    def __init__(self, data_dir: Path, max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES) -> None:
        if max_upload_bytes <= 0:
            raise InvalidInput(f"max_upload_bytes must be positive, got {max_upload_bytes}")
        self.max_upload_bytes = max_upload_bytes
        self.root = data_dir / "artifacts"
        self.root.mkdir(parents=True, exist_ok=True)

    def path_of(self, sha256: str) -> Path:
        """Where the artifact ``sha256`` lives (whether or not it exists)."""
        try:
            check_sha256(sha256)
        except InvalidName as exc:
            raise InvalidInput(str(exc)) from exc
        return self.root / sha256[:2] / sha256

    def begin(self) -> PendingArtifact:
        """Start an upload."""
        return PendingArtifact(self)

    def get(self, sha256: str) -> StoredArtifact:
        """The stored artifact ``sha256``, or :class:`NotFound`."""
        path = self.path_of(sha256)
        try:
            size = path.stat().st_size
        except FileNotFoundError as exc:
            raise NotFound(f"unknown artifact {sha256}") from exc
        return StoredArtifact(sha256=sha256, size=size, path=path)

    def contains(self, sha256: str) -> bool:
        """True when the bytes of ``sha256`` are stored."""
        return self.path_of(sha256).is_file()


def iter_range(path: Path, start: int, end: int, chunk_size: int = 1 << 16) -> Iterator[bytes]:
    """Yield bytes ``start..end`` (inclusive) of ``path`` in chunks, streaming from disk."""
    with path.open("rb") as f:
        f.seek(start)
        remaining = end - start + 1
        while remaining > 0:
            data = f.read(min(chunk_size, remaining))
            if not data:
                return
            remaining -= len(data)
            yield data


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
