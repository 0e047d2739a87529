"""Reading a .tar or .tar.gz archive from its headers, in bounded reads (external data archives).

:class:`TarArchive` walks the headers with :mod:`tarfile` over a :class:`_BoundedStream` that
refuses reads over :data:`~.archive_limits.CHUNK` and, for a tar.gz, positions past the
decompression-bomb bound; each member meets :class:`~.archive_limits.Tally`'s rules.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from collections.abc import Iterator
from typing import BinaryIO

from controller.analysis.archive_limits import (
    CHUNK,
    MAX_HEADER_BYTES,
    MAX_MEMBERS,
    MAX_RATIO,
    READ_ERRORS,
    ArchiveError,
    Member,
    Tally,
    bomb_bound,
    problem,
    safe_name,
    too_many,
)

_TAR_SLACK = MAX_HEADER_BYTES + 2 * tarfile.BLOCKSIZE * MAX_MEMBERS


class _BoundedStream:
    """The tar stream as :mod:`tarfile` reads it (a gzip's decompressed bytes): each read at most
    :data:`CHUNK` bytes (tarfile reads a pax or long-name record whole), no position past
    ``limit``."""

    def __init__(self, stream: BinaryIO | gzip.GzipFile, limit: int | None, packed: int) -> None:
        self._stream = stream
        self._limit = limit
        self._packed = packed

    def _reach(self, position: int) -> None:
        if self._limit is not None and position > self._limit:
            raise ArchiveError(
                f"the archive unpacks to more than {self._limit:,} bytes from {self._packed:,} "
                f"(over {MAX_RATIO} to 1): refused as a decompression bomb"
            )

    def read(self, size: int = -1, /) -> bytes:
        if size < 0 or size > CHUNK:
            raise ArchiveError(
                f"the archive has a header record of {size:,} bytes; at most {CHUNK:,} accepted"
            )
        self._reach(self._stream.tell() + size)
        return self._stream.read(size)

    def seek(self, position: int, whence: int = 0, /) -> int:
        if whence != os.SEEK_SET:
            raise io.UnsupportedOperation("seek from the start only")
        self._reach(position)
        return self._stream.seek(position)

    def tell(self) -> int:
        return self._stream.tell()

    def write(self, data: bytes, /) -> int:
        raise io.UnsupportedOperation("read only")

    def close(self) -> None:
        """The stream is closed by its owner."""


class TarArchive:
    """A .tar or .tar.gz: its members from their headers, with the rules of :class:`Tally`."""

    def __init__(self, file: BinaryIO, packed: int, max_bytes: int) -> None:
        head = file.read(2)
        file.seek(0)
        self._gzip = gzip.GzipFile(fileobj=file, mode="rb") if head == b"\x1f\x8b" else None
        limit = bomb_bound(packed) + _TAR_SLACK if self._gzip is not None else None
        self._stream = _BoundedStream(self._gzip or file, limit, packed)
        tally = Tally(packed, max_bytes)
        try:
            self._tar = tarfile.open(fileobj=self._stream, mode="r:")  # noqa: SIM115 (close())
            entries = header_bytes = 0
            for info in self._tar:
                entries += 1
                if entries > MAX_MEMBERS:
                    raise too_many()
                header_bytes += info.offset_data - info.offset
                if header_bytes > MAX_HEADER_BYTES:
                    raise ArchiveError(
                        f"the archive's headers take more than {MAX_HEADER_BYTES:,} bytes"
                    )
                name = safe_name(info.name)
                if info.isdir():
                    continue
                if not info.isfile():
                    kind = "link" if info.issym() or info.islnk() else "special file"
                    raise ArchiveError(f"archive member {info.name!r} is a {kind}; only files")
                if info.issparse():
                    raise ArchiveError(f"archive member {info.name!r} is a sparse file; refused")
                member = Member(name, info.name, info.size, info.offset_data, info)
                tally.add(member, packed if self._gzip is not None else info.size)
        except ArchiveError:
            self.close()
            raise
        except READ_ERRORS as exc:
            self.close()
            raise ArchiveError(f"not a readable tar archive: {problem(exc)}") from exc
        self.members = tally.members

    def chunks(self, member: Member) -> Iterator[bytes]:
        left = member.size
        self._stream.seek(member.position)
        while left > 0:
            block = self._stream.read(min(CHUNK, left))
            if not block:
                return
            left -= len(block)
            yield block

    def close(self) -> None:
        if hasattr(self, "_tar"):
            self._tar.close()
        if self._gzip is not None:
            self._gzip.close()
