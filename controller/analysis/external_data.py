"""Models with external data: an archive (.tar, .tar.gz, .zip) holding one .onnx and the files its
tensors point at becomes one self-contained ONNX model.

The controller inlines the data at upload, so everything after it (analysis, reference outputs,
ONNX Runtime and TensorRT on the gateways, engine keys) sees an ordinary model: engines are built
from the model *with* its data. The limit that follows: a protobuf message cannot exceed 2 GiB, so a
model whose inlined size would pass that is refused with that reason (such models need the archive
carried through to the gateways, which is not built).

Safety, because an archive is untrusted input (a probe sent a 1 MB zip of a 1 GiB member and a
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
  are decoded by :mod:`.archive_zip`, in bounded steps, because :mod:`zipfile` decodes them
  without a bound); corrupt data, encryption and unknown methods raise :class:`ArchiveError`
  naming the member, never an unexpected exception;
* every tensor is inlined, wherever it is (functions, subgraphs, sparse attributes:
  :mod:`controller.analysis.onnx_walk`), so nothing after the upload reads a file;
* each tensor's ``location`` must name a member beside or below the .onnx (relative, no ``..``);
  ``offset``/``length`` must lie inside that member.

:func:`external_locations` finds the files a bare .onnx points at, for the upload's error message
("push the folder or an archive").

This module inlines; the archive is read by the modules beside it: :mod:`.archive_limits` (the
limits named above, the rules each member meets from its header, :class:`ArchiveError`),
:mod:`.archive_tar` and :mod:`.archive_zip` (each kind's headers and bounded reads) and
:mod:`.archive_reading` (opening an archive, a member's content checked against its header, read
front to back).
"""

from __future__ import annotations

import posixpath
from pathlib import Path

import onnx

from controller.analysis import onnx_walk
from controller.analysis.archive_limits import ArchiveError, Member, safe_name
from controller.analysis.archive_reading import Cursor, checked_content, opened_archive

PROTOBUF_LIMIT = 2**31 - 1
ARCHIVE_HINT = (
    "push the folder holding the .onnx and its data files, or an archive of it "
    "(.tar, .tar.gz or .zip), or inline the data first: "
    "onnx.save(onnx.load(path), out, save_as_external_data=False)"
)


def is_archive(head: bytes) -> bool:
    """Whether the first bytes (>= 262) of an upload are a gzip, zip or tar archive."""
    return head[:2] == b"\x1f\x8b" or head[:4] == b"PK\x03\x04" or head[257:262] == b"ustar"


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
    with opened_archive(source, max_bytes) as archive:
        members = archive.members
        models = sorted(name for name in members if name.lower().endswith(".onnx"))
        if len(models) != 1:
            found = ", ".join(models) or "none"
            raise ArchiveError(f"the archive must hold exactly one .onnx file (found: {found})")
        onnx_name = models[0]
        model_member = members[onnx_name]
        if model_member.size > PROTOBUF_LIMIT:
            raise _too_large(onnx_name, model_member.size, "")
        cursor = Cursor(checked_content(archive, model_member))
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
            _fill(Cursor(checked_content(archive, members[name])), wanted[name])
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


def _fill(cursor: Cursor, ranges: list[_Range]) -> None:
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
    name: str, info: dict[str, str], base: str, members: dict[str, Member]
) -> tuple[Member, int, int]:
    location = info.get("location", "")
    if not location:
        raise ArchiveError(f"tensor {name!r} says its data is external but names no file")
    if location.startswith("/") or ".." in location.replace("\\", "/").split("/"):
        raise ArchiveError(
            f"tensor {name!r} points at {location!r}, outside the model's folder: refused"
        )
    member = members.get(safe_name(posixpath.join(base, location)))
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
