"""Reading a .zip archive from its central directory, in bounded reads (external data archives).

:class:`ZipArchive` counts the central directory's entries before :mod:`zipfile` makes an object
of each, refuses members that are not regular files, encryption, patch data and compression
methods other than none, deflate, bzip2 and LZMA, and decodes bzip2 and LZMA members itself in
bounded steps. Each member meets :class:`~.archive_limits.Tally`'s rules.
"""

from __future__ import annotations

import bz2
import lzma
import os
import stat
import struct
import zipfile
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from controller.analysis.archive_limits import (
    CHUNK,
    MAX_HEADER_BYTES,
    MAX_MEMBERS,
    READ_ERRORS,
    ArchiveError,
    Member,
    Tally,
    problem,
    safe_name,
    too_many,
)

_ZIP_METHODS = {
    zipfile.ZIP_STORED: "none",
    zipfile.ZIP_DEFLATED: "deflate",
    zipfile.ZIP_BZIP2: "bzip2",
    zipfile.ZIP_LZMA: "LZMA",
}
_OTHER_ZIP_METHODS = {9: "Deflate64", 93: "Zstandard", 95: "XZ", 96: "JPEG", 98: "PPMd"}
_ZIP_ENCRYPTED = 0x1 | 0x40  # traditional and strong encryption
_ZIP_PATCHED = 0x20
_ZIP_AES = 99
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # zipfile.structCentralDir
_LOCAL = struct.Struct("<4s2B4HL2L2H")  # zipfile.structFileHeader


def _count_zip_entries(file: BinaryIO) -> None:
    """Walk the zip's central directory as :mod:`zipfile` will, counting its entries, before
    zipfile makes an object of each (a million entries are a few hundred MB of them)."""
    end_record = getattr(zipfile, "_EndRecData", None)
    if end_record is None:  # a Python without it: zipfile parses, and the count comes after
        return
    end = end_record(file)
    if not end:
        return  # zipfile says why
    size, offset, declared = end[5], end[6], end[4]
    if size > MAX_HEADER_BYTES:
        raise ArchiveError(
            f"the archive's central directory takes {size:,} bytes; at most "
            f"{MAX_HEADER_BYTES:,} are accepted"
        )
    start = end[9] - size - offset
    if end[0] == b"PK\x06\x06":  # zip64: its end records sit between the directory and the end
        start -= 56 + 20
    file.seek(max(start + offset, 0))
    walked = entries = 0
    while walked < size:
        record = file.read(_CENTRAL.size)
        if len(record) != _CENTRAL.size or record[:4] != b"PK\x01\x02":
            return  # zipfile says why
        fields = _CENTRAL.unpack(record)
        extra = fields[12] + fields[13] + fields[14]
        file.seek(extra, os.SEEK_CUR)
        walked += _CENTRAL.size + extra
        entries += 1
        if entries > MAX_MEMBERS:
            count = f"{declared:,}" if declared > MAX_MEMBERS else f"more than {MAX_MEMBERS:,}"
            raise ArchiveError(
                f"the archive holds {count} entries; at most {MAX_MEMBERS:,} are accepted"
            )


class ZipArchive:
    """A .zip: its members from the central directory, with the rules of :class:`Tally`."""

    def __init__(self, file: BinaryIO, packed: int, max_bytes: int) -> None:
        self._file = file
        tally = Tally(packed, max_bytes)
        try:
            _count_zip_entries(file)
            file.seek(0)
            self._zip = zipfile.ZipFile(file)
        except ArchiveError:
            raise
        except READ_ERRORS as exc:
            raise ArchiveError(f"not a readable zip archive: {problem(exc)}") from exc
        try:
            if len(self._zip.filelist) > MAX_MEMBERS:
                raise too_many()
            for info in self._zip.infolist():
                name = safe_name(info.filename)
                if info.is_dir():
                    continue
                _check_zip_member(info)
                member = Member(name, info.filename, info.file_size, info.header_offset, info)
                tally.add(member, info.compress_size)
        except ArchiveError:
            self.close()
            raise
        self.members = tally.members

    def chunks(self, member: Member) -> Iterator[bytes]:
        info = member.info
        assert isinstance(info, zipfile.ZipInfo)
        if info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            with self._zip.open(info) as handle:  # bounded reads; the CRC checked at the end
                while block := handle.read(CHUNK):
                    yield block
        else:
            yield from self._decoded(info)

    def _decoded(self, info: zipfile.ZipInfo) -> Iterator[bytes]:
        """A bzip2 or LZMA member, decoded at most :data:`CHUNK` bytes a step: zipfile's own
        decoders turn any block they are given into all it unpacks to."""
        self._file.seek(info.header_offset)
        header = self._file.read(_LOCAL.size)
        if len(header) != _LOCAL.size or header[:4] != b"PK\x03\x04":
            raise ArchiveError(f"archive member {info.filename!r} has no valid local header")
        fields = _LOCAL.unpack(header)
        position = info.header_offset + _LOCAL.size + fields[10] + fields[11]
        left = info.compress_size
        decoder: bz2.BZ2Decompressor | lzma.LZMADecompressor
        if info.compress_type == zipfile.ZIP_LZMA:
            self._file.seek(position)
            head = self._file.read(4)
            props = self._file.read(int.from_bytes(head[2:4], "little"))
            position += len(head) + len(props)
            left -= len(head) + len(props)
            decoder = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[_lzma1(props, info)])
        else:
            decoder = bz2.BZ2Decompressor()
        crc = 0
        while left > 0 and not decoder.eof:
            self._file.seek(position)
            block = self._file.read(min(CHUNK, left))
            if not block:
                break
            position += len(block)
            left -= len(block)
            out = decoder.decompress(block, CHUNK)
            while True:
                crc = zlib.crc32(out, crc)
                yield out
                if decoder.eof or decoder.needs_input:
                    break
                out = decoder.decompress(b"", CHUNK)
        if crc != info.CRC:
            raise ArchiveError(f"archive member {info.filename!r} is corrupt: bad CRC-32")

    def close(self) -> None:
        if hasattr(self, "_zip"):
            self._zip.close()


def _check_zip_member(info: zipfile.ZipInfo) -> None:
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind not in (0, stat.S_IFREG):  # no type bits: ZipFile.writestr and DOS tools
        raise ArchiveError(f"archive member {info.filename!r} is not a regular file")
    if info.flag_bits & _ZIP_ENCRYPTED or info.compress_type == _ZIP_AES:
        raise ArchiveError(
            f"archive member {info.filename!r} is encrypted; push an archive without a password"
        )
    if info.flag_bits & _ZIP_PATCHED:
        raise ArchiveError(f"archive member {info.filename!r} holds patch data; not supported")
    if info.compress_type not in _ZIP_METHODS:
        method = _OTHER_ZIP_METHODS.get(info.compress_type, "unknown")
        raise ArchiveError(
            f"archive member {info.filename!r} uses compression method {info.compress_type} "
            f"({method}), which is not supported: use deflate (zip's default) or none"
        )


def _lzma1(props: bytes, info: zipfile.ZipInfo) -> dict[str, int]:
    """The LZMA1 filter of a zip member's properties (5 bytes: lc/lp/pb and the dictionary
    size, which need not be larger than the member)."""
    if len(props) != 5 or props[0] >= 9 * 5 * 5:
        raise ArchiveError(f"archive member {info.filename!r} is corrupt: bad LZMA properties")
    lc, rest = props[0] % 9, props[0] // 9
    size = max(min(int.from_bytes(props[1:5], "little"), info.file_size), 4096)
    return {"id": lzma.FILTER_LZMA1, "lc": lc, "lp": rest % 5, "pb": rest // 5, "dict_size": size}
