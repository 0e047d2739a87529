"""The rules an archive's members meet from their headers alone, before any content is read.

Limits (:data:`MAX_MEMBERS`, :data:`MAX_RATIO` over :data:`RATIO_FLOOR`, :data:`MAX_HEADER_BYTES`,
:data:`CHUNK`), safe member names, and :class:`Tally`, which keeps each regular file
(:class:`Member`) while refusing duplicates and decompression bombs. :class:`ArchiveError` is what
every refusal raises; :data:`READ_ERRORS` are the exceptions a corrupt archive makes the standard
library raise, which the readers (:mod:`.archive_tar`, :mod:`.archive_zip`,
:mod:`.archive_reading`) turn into it. The whole picture: :mod:`controller.analysis.external_data`.
"""

from __future__ import annotations

import lzma
import struct
import tarfile
import zipfile
import zlib
from dataclasses import dataclass

MAX_MEMBERS = 10_000
"""The most entries (files and directories) an archive may hold."""
MAX_RATIO = 200
"""A member (or an archive) unpacking to over this many times its packed size, and to over
:data:`RATIO_FLOOR`, is refused as a decompression bomb."""
RATIO_FLOOR = 64 << 20
MAX_HEADER_BYTES = 16 << 20
"""The most bytes a zip's central directory, or a tar's headers together, may take."""
CHUNK = 64 << 10
"""The most bytes read, or decompressed, at once (also the largest tar header record)."""

READ_ERRORS = (
    tarfile.TarError,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    lzma.LZMAError,
    EOFError,
    OSError,
    NotImplementedError,
    RuntimeError,  # zipfile: an encrypted member; RecursionError: a chain of tar pax headers
    struct.error,
    UnicodeDecodeError,
)


class ArchiveError(ValueError):
    """The archive or its model cannot be accepted; the message says why and what to do."""


def safe_name(name: str) -> str:
    clean = name.replace("\\", "/")
    if clean.startswith("/") or (len(clean) > 1 and clean[1] == ":"):
        raise ArchiveError(f"archive member {name!r} has an absolute path")
    parts = [p for p in clean.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveError(f"archive member {name!r} points outside the archive ('..')")
    return "/".join(parts)


def problem(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, EOFError):
        return f"its data ends early{': ' + text if text else ''}"
    return text or type(exc).__name__


def too_many() -> ArchiveError:
    return ArchiveError(
        f"the archive holds more than {MAX_MEMBERS:,} entries; at most {MAX_MEMBERS:,} are accepted"
    )


def bomb_bound(packed: int) -> int:
    """The most bytes ``packed`` bytes may unpack to."""
    return max(MAX_RATIO * packed, RATIO_FLOOR)


@dataclass(frozen=True)
class Member:
    """A regular file of the archive, as its header describes it."""

    name: str  # normalised
    raw_name: str  # as the archive spells it, for messages
    size: int
    position: int  # where its data starts in the archive: members are read in this order
    info: tarfile.TarInfo | zipfile.ZipInfo


class Tally:
    """The rules every member meets from its header, before anything of it is read."""

    def __init__(self, packed: int, max_bytes: int) -> None:
        self.packed = packed
        self.max_bytes = max_bytes
        self.unpacked = 0
        self.members: dict[str, Member] = {}

    def add(self, member: Member, packed: int) -> None:
        """Keep ``member``, which takes ``packed`` bytes in the archive (ArchiveError)."""
        if member.name in self.members:
            raise ArchiveError(f"archive member {member.raw_name!r} appears more than once")
        if member.size > bomb_bound(max(packed, 1)):
            raise ArchiveError(
                f"archive member {member.raw_name!r} would unpack to {member.size:,} bytes from "
                f"{packed:,} (over {MAX_RATIO} to 1): refused as a decompression bomb"
            )
        self.unpacked += member.size
        if self.unpacked > self.max_bytes:
            raise ArchiveError(f"archive unpacks to more than {self.max_bytes} bytes")
        if self.unpacked > bomb_bound(self.packed):
            raise ArchiveError(
                f"the archive would unpack to more than {bomb_bound(self.packed):,} bytes from "
                f"{self.packed:,} (over {MAX_RATIO} to 1): refused as a decompression bomb"
            )
        self.members[member.name] = member
