"""Files that survive a power cut: hashing, atomic replacement, directory fsync.

Every file the agent keeps (desired document, swap journal, models, engines, cache records) is
written here, so ``kill -9`` or a power cut at any instant leaves the old file or the new one,
never half of either.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

CHUNK = 1 << 20


def sha256_file(path: Path) -> tuple[int, str]:
    """(size, sha256 hex) of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new file."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # a full disk: give back what the attempt took
            tmp.unlink()
        raise
    fsync_dir(path.parent)
