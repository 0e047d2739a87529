"""Reading an archive's members: opened by kind, checked against their headers, read forward.

:func:`opened_archive` opens a .tar, .tar.gz (:mod:`.archive_tar`) or .zip (:mod:`.archive_zip`)
from memory or a file; :func:`checked_content` streams a member, refusing one shorter or longer
than its header says; :class:`Cursor` reads byte ranges of it front to back, never extracting
anything to disk.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from controller.analysis.archive_limits import READ_ERRORS, ArchiveError, Member, problem
from controller.analysis.archive_tar import TarArchive
from controller.analysis.archive_zip import ZipArchive


class Archive(Protocol):
    members: dict[str, Member]

    def chunks(self, member: Member) -> Iterator[bytes]:
        """The member's content, a bounded chunk at a time (unchecked: see
        :func:`checked_content`)."""
        ...


def checked_content(archive: Archive, member: Member) -> Iterator[bytes]:
    """The member's content, checked against the size its header gave; ArchiveError naming the
    member for anything the reading raises."""
    seen = 0
    try:
        for block in archive.chunks(member):
            seen += len(block)
            if seen > member.size:
                raise ArchiveError(
                    f"archive member {member.raw_name!r} is larger than its header says "
                    f"({member.size:,} bytes)"
                )
            yield block
    except ArchiveError:
        raise
    except READ_ERRORS as exc:
        raise ArchiveError(
            f"archive member {member.raw_name!r} is corrupt: {problem(exc)}"
        ) from exc
    if seen != member.size:
        raise ArchiveError(
            f"archive member {member.raw_name!r} is not the size it says: {seen:,} bytes of "
            f"{member.size:,}"
        )


class Cursor:
    """A forward-only reader over a member's chunks."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending = b""
        self.position = 0

    def _next(self, most: int) -> bytes:
        if not self._pending:
            self._pending = next(self._chunks, b"")
        block, self._pending = self._pending[:most], self._pending[most:]
        self.position += len(block)
        return block

    def skip_to(self, position: int) -> None:
        while self.position < position:
            if not self._next(position - self.position):
                raise ArchiveError("archive member ends early")  # checked_content names it first

    def take(self, length: int) -> bytes:
        out = io.BytesIO()
        while out.tell() < length:
            block = self._next(length - out.tell())
            if not block:
                raise ArchiveError("archive member ends early")
            out.write(block)
        return out.getvalue()

    def drain(self) -> None:
        for _ in self._chunks:
            pass


@contextmanager
def opened_archive(source: bytes | Path, max_bytes: int) -> Iterator[TarArchive | ZipArchive]:
    with io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb") as file:
        packed = file.seek(0, os.SEEK_END)
        file.seek(0)
        head = file.read(4)
        file.seek(0)
        archive = (ZipArchive if head == b"PK\x03\x04" else TarArchive)(file, packed, max_bytes)
        try:
            yield archive
        finally:
            archive.close()
