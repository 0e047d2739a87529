"""Local copies of object-store artifacts: ``<data-dir>/artifact-cache/<sha[:2]>/<sha>``, bounded.

With an object-store backend, the readers that need a file (the analysis and reference-output
child processes, an operator's reference upload checked against its model) get one from here, and
downloads of cached artifacts are served from this disk. Each copy is verified against its
sha256 before it is renamed into place; a partial or altered copy never is. Past ``bound_bytes``
the least recently used copies are deleted (a hit counts as a use), never the one just placed:
keep the bound above the largest artifacts read at the same time.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from controller.errors import StorageError

logger = logging.getLogger(__name__)

TEMP_PREFIX = "."
"""Temporary files (uploads being written, copies being fetched) start with a dot and are not
counted as cached."""


class LocalCache:
    """A bounded, verified, content-addressed directory of local copies."""

    def __init__(self, root: Path, bound_bytes: int) -> None:
        if bound_bytes <= 0:
            raise StorageError(f"the artifact cache bound must be positive, got {bound_bytes}")
        self.root = root
        self.bound_bytes = bound_bytes
        self._lock = threading.Lock()
        root.mkdir(parents=True, exist_ok=True)

    def path_of(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def hit(self, sha256: str) -> Path | None:
        """The local copy of ``sha256`` (marked as just used), or None."""
        path = self.path_of(sha256)
        try:
            os.utime(path)
        except FileNotFoundError:
            return None
        return path

    def keep(self, sha256: str, file: Path) -> Path:
        """Move the verified file ``file`` (in this cache's directory) in as the copy of
        ``sha256``, then delete the least recently used copies past the bound."""
        path = self.path_of(sha256)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(file, path)
        self._evict(path)
        return path

    def fill(self, sha256: str, fetch: Callable[[Callable[[bytes], object]], None]) -> Path:
        """Fetch a copy of ``sha256`` (``fetch(write)`` passes every byte to ``write``), check
        its sha256 and keep it; StorageError when the store sent other bytes."""
        fd, name = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}fetch-", dir=self.root)
        tmp = Path(name)
        digest = hashlib.sha256()
        try:
            with os.fdopen(fd, "wb") as f:

                def write(chunk: bytes) -> None:
                    digest.update(chunk)
                    f.write(chunk)

                fetch(write)
            if digest.hexdigest() != sha256:
                raise StorageError(
                    f"the object store holds other bytes under artifact {sha256} (sha256 "
                    f"{digest.hexdigest()}): it was altered outside the controller; push the "
                    "artifact again"
                )
            return self.keep(sha256, tmp)
        finally:
            tmp.unlink(missing_ok=True)

    def size(self) -> int:
        """Bytes held by the cached copies."""
        return sum(size for _, _, size in self._entries())

    def _entries(self) -> list[tuple[float, Path, int]]:
        found: list[tuple[float, Path, int]] = []
        for sub in self.root.iterdir():
            if sub.name.startswith(TEMP_PREFIX) or not sub.is_dir():
                continue
            for entry in os.scandir(sub):
                if entry.name.startswith(TEMP_PREFIX):
                    continue
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue
                found.append((st.st_mtime, Path(entry.path), st.st_size))
        return found

    def _evict(self, placed: Path) -> None:
        with self._lock:
            entries = sorted(self._entries())
            total = sum(size for _, _, size in entries)
            for _, path, size in entries:
                if total <= self.bound_bytes:
                    break
                if path == placed:
                    continue
                path.unlink(missing_ok=True)
                total -= size
                logger.debug("artifact cache: dropped %s (%d bytes)", path.name, size)
