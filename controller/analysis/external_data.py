"""Models with external data: an archive (.tar, .tar.gz, .zip) holding one .onnx and the files its
tensors point at becomes one self-contained ONNX model (issue 16 item 7).

The controller inlines the data at upload, so everything after it (analysis, reference outputs,
ONNX Runtime and TensorRT on the gateways, engine keys) sees an ordinary model: engines are built
from the model *with* its data. The limit that follows: a protobuf message cannot exceed 2 GiB, so a
model whose inlined size would pass that is refused with that reason (such models need the archive
carried through to the gateways, which is not built).

Safety, because an archive is untrusted input (issue 29 N8: a 1 MB zip of a 1 GiB member and a
tar.gz of a million empty members took the API process from 190 MB to 2.2 GB):

* every member is first checked from its header alone, before any content is read: at most
  :data:`MAX_MEMBERS` entries (counted while the headers are walked; a zip's central directory is
  counted before :mod:`zipfile` parses it, and may take at most :data:`MAX_HEADER_BYTES`, as may a
  tar's headers); only regular files and directories (symbolic and hard links, devices, FIFOs and
  sparse files are refused; a zip member without file-type bits, as ``ZipFile.writestr`` writes
  it, is a regular file), no name absolute or containing ``..``, no name twice, no tar header
  record over :data:`CHUNK`; no encrypted zip member, and zip compression none, deflate, bzip2 or
  LZMA only;
* unpacked sizes are bounded from the headers: a member that would unpack to over
  :data:`MAX_RATIO` times its packed size (a tar.gz member: the whole archive's) and over
  :data:`RATIO_FLOOR` is refused as a decompression bomb, as is an archive whose members together
  would; the members' total must stay within ``max_bytes``;
* only what the model needs is read, from memory or the upload's file, never extracted to disk:
  the .onnx member first, then, of each data file its tensors point at, only the byte ranges they
  name (each member streamed once, front to back; the rest of it is read through only to check
  it), so memory while inlining is bounded by the model that results (protobuf holds it, and a
  copy while serializing it), not by the archive; a member nothing points at is never read (a
  tar.gz's is decompressed only to be skipped over, within the bound above);
* sizes are checked again while reading: a member that is shorter or longer than its header says
  (or, in a zip, fails its CRC) is refused; every read is bounded (zip's bzip2 and LZMA members
  are decoded here, in bounded steps, because :mod:`zipfile` decodes them without a bound); corrupt
  data, encryption and unknown methods raise :class:`ArchiveError` naming the member, never an
  unexpected exception;
* every tensor is inlined, wherever it is (functions, subgraphs, sparse attributes:
  :mod:`controller.analysis.onnx_walk`), so nothing after the upload reads a file;
* each tensor's ``location`` must name a member beside or below the .onnx (relative, no ``..``);
  ``offset``/``length`` must lie inside that member.

:func:`external_locations` finds the files a bare .onnx points at, for the upload's error message
("push the folder or an archive").
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import posixpath
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

import onnx

from controller.analysis import onnx_walk

PROTOBUF_LIMIT = 2**31 - 1
ARCHIVE_HINT = (
    "push the folder holding the .onnx and its data files, or an archive of it "
    "(.tar, .tar.gz or .zip), or inline the data first: "
    "onnx.save(onnx.load(path), out, save_as_external_data=False)"
)
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

_TAR_SLACK = MAX_HEADER_BYTES + 2 * tarfile.BLOCKSIZE * MAX_MEMBERS
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
_READ_ERRORS = (
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


def is_archive(head: bytes) -> bool:
    """Whether the first bytes (>= 262) of an upload are a gzip, zip or tar archive."""
    return head[:2] == b"\x1f\x8b" or head[:4] == b"PK\x03\x04" or head[257:262] == b"ustar"


def _safe_name(name: str) -> str:
    clean = name.replace("\\", "/")
    if clean.startswith("/") or (len(clean) > 1 and clean[1] == ":"):
        raise ArchiveError(f"archive member {name!r} has an absolute path")
    parts = [p for p in clean.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveError(f"archive member {name!r} points outside the archive ('..')")
    return "/".join(parts)


def _problem(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, EOFError):
        return f"its data ends early{': ' + text if text else ''}"
    return text or type(exc).__name__


def _too_many() -> ArchiveError:
    return ArchiveError(
        f"the archive holds more than {MAX_MEMBERS:,} entries; at most {MAX_MEMBERS:,} are accepted"
    )


def _bomb_bound(packed: int) -> int:
    """The most bytes ``packed`` bytes may unpack to."""
    return max(MAX_RATIO * packed, RATIO_FLOOR)


@dataclass(frozen=True)
class _Member:
    """A regular file of the archive, as its header describes it."""

    name: str  # normalised
    raw_name: str  # as the archive spells it, for messages
    size: int
    position: int  # where its data starts in the archive: members are read in this order
    info: tarfile.TarInfo | zipfile.ZipInfo


class _Tally:
    """The rules every member meets from its header, before anything of it is read."""

    def __init__(self, packed: int, max_bytes: int) -> None:
        self.packed = packed
        self.max_bytes = max_bytes
        self.unpacked = 0
        self.members: dict[str, _Member] = {}

    def add(self, member: _Member, packed: int) -> None:
        """Keep ``member``, which takes ``packed`` bytes in the archive (ArchiveError)."""
        if member.name in self.members:
            raise ArchiveError(f"archive member {member.raw_name!r} appears more than once")
        if member.size > _bomb_bound(max(packed, 1)):
            raise ArchiveError(
                f"archive member {member.raw_name!r} would unpack to {member.size:,} bytes from "
                f"{packed:,} (over {MAX_RATIO} to 1): refused as a decompression bomb"
            )
        self.unpacked += member.size
        if self.unpacked > self.max_bytes:
            raise ArchiveError(f"archive unpacks to more than {self.max_bytes} bytes")
        if self.unpacked > _bomb_bound(self.packed):
            raise ArchiveError(
                f"the archive would unpack to more than {_bomb_bound(self.packed):,} bytes from "
                f"{self.packed:,} (over {MAX_RATIO} to 1): refused as a decompression bomb"
            )
        self.members[member.name] = member


class _Archive(Protocol):
    members: dict[str, _Member]

    def chunks(self, member: _Member) -> Iterator[bytes]:
        """The member's content, a bounded chunk at a time (unchecked: see :func:`_content`)."""
        ...


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


class _Tar:
    """A .tar or .tar.gz: its members from their headers, with the rules of :class:`_Tally`."""

    def __init__(self, file: BinaryIO, packed: int, max_bytes: int) -> None:
        head = file.read(2)
        file.seek(0)
        self._gzip = gzip.GzipFile(fileobj=file, mode="rb") if head == b"\x1f\x8b" else None
        limit = _bomb_bound(packed) + _TAR_SLACK if self._gzip is not None else None
        self._stream = _BoundedStream(self._gzip or file, limit, packed)
        tally = _Tally(packed, max_bytes)
        try:
            self._tar = tarfile.open(fileobj=self._stream, mode="r:")  # noqa: SIM115 (close())
            entries = header_bytes = 0
            for info in self._tar:
                entries += 1
                if entries > MAX_MEMBERS:
                    raise _too_many()
                header_bytes += info.offset_data - info.offset
                if header_bytes > MAX_HEADER_BYTES:
                    raise ArchiveError(
                        f"the archive's headers take more than {MAX_HEADER_BYTES:,} bytes"
                    )
                name = _safe_name(info.name)
                if info.isdir():
                    continue
                if not info.isfile():
                    kind = "link" if info.issym() or info.islnk() else "special file"
                    raise ArchiveError(f"archive member {info.name!r} is a {kind}; only files")
                if info.issparse():
                    raise ArchiveError(f"archive member {info.name!r} is a sparse file; refused")
                member = _Member(name, info.name, info.size, info.offset_data, info)
                tally.add(member, packed if self._gzip is not None else info.size)
        except ArchiveError:
            self.close()
            raise
        except _READ_ERRORS as exc:
            self.close()
            raise ArchiveError(f"not a readable tar archive: {_problem(exc)}") from exc
        self.members = tally.members

    def chunks(self, member: _Member) -> Iterator[bytes]:
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


class _Zip:
    """A .zip: its members from the central directory, with the rules of :class:`_Tally`."""

    def __init__(self, file: BinaryIO, packed: int, max_bytes: int) -> None:
        self._file = file
        tally = _Tally(packed, max_bytes)
        try:
            _count_zip_entries(file)
            file.seek(0)
            self._zip = zipfile.ZipFile(file)
        except ArchiveError:
            raise
        except _READ_ERRORS as exc:
            raise ArchiveError(f"not a readable zip archive: {_problem(exc)}") from exc
        try:
            if len(self._zip.filelist) > MAX_MEMBERS:
                raise _too_many()
            for info in self._zip.infolist():
                name = _safe_name(info.filename)
                if info.is_dir():
                    continue
                _check_zip_member(info)
                member = _Member(name, info.filename, info.file_size, info.header_offset, info)
                tally.add(member, info.compress_size)
        except ArchiveError:
            self.close()
            raise
        self.members = tally.members

    def chunks(self, member: _Member) -> Iterator[bytes]:
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


def _content(archive: _Archive, member: _Member) -> Iterator[bytes]:
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
    except _READ_ERRORS as exc:
        raise ArchiveError(
            f"archive member {member.raw_name!r} is corrupt: {_problem(exc)}"
        ) from exc
    if seen != member.size:
        raise ArchiveError(
            f"archive member {member.raw_name!r} is not the size it says: {seen:,} bytes of "
            f"{member.size:,}"
        )


class _Cursor:
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
                raise ArchiveError("archive member ends early")  # _content names it first

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
def _opened_archive(source: bytes | Path, max_bytes: int) -> Iterator[_Tar | _Zip]:
    with io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb") as file:
        packed = file.seek(0, os.SEEK_END)
        file.seek(0)
        head = file.read(4)
        file.seek(0)
        archive = (_Zip if head == b"PK\x03\x04" else _Tar)(file, packed, max_bytes)
        try:
            yield archive
        finally:
            archive.close()


def _external(tensor: onnx.TensorProto) -> dict[str, str] | None:
    if tensor.data_location != onnx.TensorProto.EXTERNAL:
        return None
    return {entry.key: entry.value for entry in tensor.external_data}


def external_locations(model: onnx.ModelProto) -> list[str]:
    """The files a model's tensors keep their data in (empty for a self-contained model), with
    where the first tensor naming each was found when that is not the main graph
    (``secret (in function evil.Leak)``): every tensor counts, functions' included
    (:func:`controller.analysis.onnx_walk.tensors`)."""
    found: dict[str, str] = {}
    for where, tensor in onnx_walk.tensors(model):
        info = _external(tensor)
        if info is not None:
            found.setdefault(info.get("location", ""), where)
    return sorted(
        loc if where == "the graph" else f"{loc} (in {where})" for loc, where in found.items()
    )


_Range = tuple[int, int, onnx.TensorProto]  # offset, length, the tensor they fill


def inline_archive(source: bytes | Path, max_bytes: int) -> bytes:
    """One self-contained ONNX model from an archive (its bytes, or the file holding it) of one
    .onnx and its data (ArchiveError)."""
    with _opened_archive(source, max_bytes) as archive:
        members = archive.members
        models = sorted(name for name in members if name.lower().endswith(".onnx"))
        if len(models) != 1:
            found = ", ".join(models) or "none"
            raise ArchiveError(f"the archive must hold exactly one .onnx file (found: {found})")
        onnx_name = models[0]
        model_member = members[onnx_name]
        if model_member.size > PROTOBUF_LIMIT:
            raise _too_large(onnx_name, model_member.size, "")
        cursor = _Cursor(_content(archive, model_member))
        text = cursor.take(model_member.size)
        cursor.drain()
        try:
            model = onnx.load_model_from_string(text)
        except Exception as exc:  # protobuf DecodeError and friends all mean "not ONNX"
            raise ArchiveError(
                f"{onnx_name} in the archive is not a valid ONNX model: {exc}"
            ) from exc
        del text
        wanted: dict[str, list[_Range]] = {}
        total = model_member.size
        base = posixpath.dirname(onnx_name)
        for _, tensor in onnx_walk.tensors(model):
            info = _external(tensor)
            if info is None:
                continue
            member, offset, length = _tensor_range(tensor.name, info, base, members)
            total += length
            if total > PROTOBUF_LIMIT:
                raise _too_large(onnx_name, total, "at least ")
            wanted.setdefault(member.name, []).append((offset, length, tensor))
        for name in sorted(wanted, key=lambda n: members[n].position):
            _fill(_Cursor(_content(archive, members[name])), wanted[name])
    size = model.ByteSize()
    if size > PROTOBUF_LIMIT:
        raise _too_large(onnx_name, size, "")
    inlined: bytes = model.SerializeToString()
    return inlined


def _too_large(onnx_name: str, size: int, at_least: str) -> ArchiveError:
    return ArchiveError(
        f"{onnx_name} with its data is {at_least}{size} bytes, over ONNX's 2 GiB limit for "
        "one file; models this large are not supported yet"
    )


def _fill(cursor: _Cursor, ranges: list[_Range]) -> None:
    """Give each tensor its bytes, reading the member once, front to back: overlapping ranges
    are read as one span (no larger than the ranges together), then the rest of the member is
    read through so that its size (and a zip's CRC) is checked."""
    ranges.sort(key=lambda r: r[0])
    index = 0
    while index < len(ranges):
        start = ranges[index][0]
        end = start + ranges[index][1]
        last = index + 1
        while last < len(ranges) and ranges[last][0] < end:
            end = max(end, ranges[last][0] + ranges[last][1])
            last += 1
        cursor.skip_to(start)
        span = cursor.take(end - start)
        for offset, length, tensor in ranges[index:last]:
            tensor.raw_data = span[offset - start : offset - start + length]
            del tensor.external_data[:]
            tensor.data_location = onnx.TensorProto.DEFAULT
        del span
        index = last
    cursor.drain()


def _tensor_range(
    name: str, info: dict[str, str], base: str, members: dict[str, _Member]
) -> tuple[_Member, int, int]:
    location = info.get("location", "")
    if not location:
        raise ArchiveError(f"tensor {name!r} says its data is external but names no file")
    if location.startswith("/") or ".." in location.replace("\\", "/").split("/"):
        raise ArchiveError(
            f"tensor {name!r} points at {location!r}, outside the model's folder: refused"
        )
    member = members.get(_safe_name(posixpath.join(base, location)))
    if member is None:
        raise ArchiveError(
            f"tensor {name!r} keeps its data in {location!r}, which the archive lacks"
        )
    try:
        offset = int(info.get("offset", "0"))
        length = int(info["length"]) if "length" in info else member.size - offset
    except ValueError as exc:
        raise ArchiveError(f"tensor {name!r} has a malformed offset or length: {exc}") from exc
    if offset < 0 or length < 0 or offset + length > member.size:
        raise ArchiveError(
            f"tensor {name!r} reads bytes {offset}..{offset + length} of {location!r}, "
            f"which has {member.size}"
        )
    return member, offset, length
