"""Content-addressed artifact store: ``<data-dir>/artifacts/<sha[:2]>/<sha>``.

Uploads stream into a temporary file next to their final place while being hashed; only a
complete, verified file is renamed into place (atomically), and bytes already stored are not
stored twice. A reader never sees a half-written artifact.
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
from shared.canonical import is_sha256_hex


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
        """Append ``chunk`` to the upload."""
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

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "artifacts"
        self.root.mkdir(parents=True, exist_ok=True)

    def path_of(self, sha256: str) -> Path:
        """Where the artifact ``sha256`` lives (whether or not it exists)."""
        if not is_sha256_hex(sha256):
            raise InvalidInput(f"invalid sha256 {sha256!r}: expected 64 lower-case hex digits")
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
