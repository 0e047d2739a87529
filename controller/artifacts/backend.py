"""Where artifact bytes live: the :class:`Backend` seam and the filesystem backend.

A backend stores objects under keys relative to its root, ``/``-separated:
``artifacts/<sha[:2]>/<sha>`` for content-addressed artifacts and
``artifacts/references/<sha>.json`` for the small index documents beside them. Every backend
makes an object visible whole or not at all. :class:`FileBackend` is the data directory (today's
layout, also right on a shared mount); :mod:`controller.artifacts.s3` is an S3-compatible bucket
(the only boto3 user, imported only when ``--artifact-store s3://...`` chooses it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from controller.errors import InvalidInput, NotFound
from shared.names import InvalidName, check_sha256

CHUNK = 1 << 16
_DOCUMENT = re.compile(r"[a-z]+/[0-9a-f]{64}\.json")


def artifact_key(sha256: str) -> str:
    """The key of artifact ``sha256``: ``artifacts/<sha[:2]>/<sha>``; InvalidInput unless a
    sha256 (no path tricks)."""
    try:
        check_sha256(sha256)
    except InvalidName as exc:
        raise InvalidInput(str(exc)) from exc
    return f"artifacts/{sha256[:2]}/{sha256}"


def document_key(name: str) -> str:
    """The key of a small document beside the artifacts, e.g. ``references/<sha>.json``."""
    if not _DOCUMENT.fullmatch(name):
        raise InvalidInput(f"invalid artifact document name {name!r}")
    return f"artifacts/{name}"


class Backend(Protocol):
    """An object store for artifacts. Missing objects raise NotFound; a store that cannot be
    reached or refuses raises :class:`controller.errors.StorageError`."""

    label: str
    """Where the objects are, for logs and errors (a directory, ``s3://bucket/prefix``)."""

    def check(self) -> None:
        """At start: StorageError naming what to fix when the store cannot be used."""

    def size(self, key: str) -> int | None:
        """The size of object ``key``; None when there is none."""

    def put_file(self, key: str, path: Path, size: int) -> None:
        """Store the verified local file ``path`` (``size`` bytes) as ``key``, visible only once
        complete. The file may be moved away (the filesystem backend renames it); the caller
        drops or keeps what is left."""

    def open_range(self, key: str, start: int, end: int) -> Iterator[bytes]:
        """Bytes ``start..end`` (inclusive) of ``key`` in chunks. The object is opened before
        this returns (NotFound, StorageError here, before an HTTP answer starts)."""

    def local_file(self, key: str) -> Path | None:
        """The object itself as a local file, when the backend is a directory; None otherwise
        (the caller fetches a copy)."""

    def fetch(self, key: str, write: Callable[[bytes], object]) -> None:
        """Pass every byte of ``key`` to ``write``, in order."""

    def put_bytes(self, key: str, data: bytes) -> None:
        """Store (or replace) a small document atomically."""

    def get_bytes(self, key: str) -> bytes | None:
        """A small document; None when there is none."""

    def presign(self, key: str, expires_s: int) -> str | None:
        """A URL anyone may GET ``key`` from for ``expires_s`` seconds; None: not supported."""


class FileBackend:
    """Objects as files under a directory (``<data-dir>``: ``<data-dir>/artifacts/...``).

    :meth:`put_file` renames the upload's temporary file (written in the same directory, so on
    the same file system) into place atomically and fsyncs the directory; bytes already stored
    are not stored twice.
    """

    def __init__(self, base: Path) -> None:
        self.base = base
        self.label = str(base / "artifacts")

    def path(self, key: str) -> Path:
        return self.base / key

    def check(self) -> None:
        (self.base / "artifacts").mkdir(parents=True, exist_ok=True)

    def size(self, key: str) -> int | None:
        try:
            return self.path(key).stat().st_size
        except FileNotFoundError:
            return None

    def put_file(self, key: str, path: Path, size: int) -> None:
        final = self.path(key)
        if final.exists():
            path.unlink(missing_ok=True)
            return
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, final)
        _fsync_dir(final.parent)

    def open_range(self, key: str, start: int, end: int) -> Iterator[bytes]:
        try:
            f = self.path(key).open("rb")
        except FileNotFoundError as exc:
            raise NotFound(f"unknown artifact {key.rsplit('/', 1)[-1]}") from exc
        return read_range(f, start, end)

    def local_file(self, key: str) -> Path | None:
        return self.path(key)

    def fetch(self, key: str, write: Callable[[bytes], object]) -> None:
        for chunk in self.open_range(key, 0, (self.size(key) or 1) - 1):
            write(chunk)

    def put_bytes(self, key: str, data: bytes) -> None:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def get_bytes(self, key: str) -> bytes | None:
        try:
            return self.path(key).read_bytes()
        except OSError:
            return None

    def presign(self, key: str, expires_s: int) -> str | None:
        return None


class Chunks:
    """Byte chunks from an open source, closed when exhausted, closed, or collected (a download
    whose client went away before the first chunk leaves no open file or connection behind)."""

    def __init__(self, chunks: Iterator[bytes], close: Callable[[], object]) -> None:
        self._chunks = chunks
        self._close: Callable[[], object] | None = close

    def __iter__(self) -> Chunks:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self._chunks)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        close, self._close = self._close, None
        if close is not None:
            close()

    def __del__(self) -> None:
        self.close()


def read_range(f: BinaryIO, start: int, end: int, chunk_size: int = CHUNK) -> Chunks:
    """Bytes ``start..end`` (inclusive) of the open binary file ``f``, which is closed after."""

    def chunks() -> Iterator[bytes]:
        f.seek(start)
        remaining = end - start + 1
        while remaining > 0:
            data = f.read(min(chunk_size, remaining))
            if not data:
                return
            remaining -= len(data)
            yield data

    return Chunks(chunks(), f.close)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
