"""Models with external data: an archive (.tar, .tar.gz, .zip) holding one .onnx and the files its
tensors point at becomes one self-contained ONNX model (issue 16 item 7).

The controller inlines the data at upload, so everything after it (analysis, reference outputs,
ONNX Runtime and TensorRT on the gateways, engine keys) sees an ordinary model: engines are built
from the model *with* its data. The limit that follows: a protobuf message cannot exceed 2 GiB, so a
model whose inlined size would pass that is refused with that reason (such models need the archive
carried through to the gateways, which is not built).

Safety, because an archive is untrusted input:

* members are read from memory, never extracted to disk; only regular files and directories are
  accepted (symbolic and hard links, devices and FIFOs are refused), and no name may be absolute or
  contain ``..``;
* sizes are checked from the headers before reading and again while reading (a zip member whose
  header lies about its size is refused), the total against ``max_bytes``;
* every tensor is inlined, wherever it is (functions, subgraphs, sparse attributes:
  :mod:`controller.analysis.onnx_walk`), so nothing after the upload reads a file;
* each tensor's ``location`` must name a member beside or below the .onnx (relative, no ``..``);
  ``offset``/``length`` must lie inside that member.

:func:`external_locations` finds the files a bare .onnx points at, for the upload's error message
("push the folder or an archive").
"""

from __future__ import annotations

import io
import posixpath
import stat
import tarfile
import zipfile

import onnx

from controller.analysis import onnx_walk

PROTOBUF_LIMIT = 2**31 - 1
ARCHIVE_HINT = (
    "push the folder holding the .onnx and its data files, or an archive of it "
    "(.tar, .tar.gz or .zip), or inline the data first: "
    "onnx.save(onnx.load(path), out, save_as_external_data=False)"
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


def _tar_members(data: bytes, max_bytes: int) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            for member in tar:
                name = _safe_name(member.name)
                if member.isdir():
                    continue
                if not member.isfile():
                    kind = "link" if member.issym() or member.islnk() else "special file"
                    raise ArchiveError(f"archive member {member.name!r} is a {kind}; only files")
                total += member.size
                if total > max_bytes:
                    raise ArchiveError(f"archive unpacks to more than {max_bytes} bytes")
                handle = tar.extractfile(member)
                if handle is None:
                    raise ArchiveError(f"archive member {member.name!r} cannot be read")
                content = handle.read(member.size + 1)
                if len(content) != member.size:
                    raise ArchiveError(f"archive member {member.name!r} is truncated")
                files[name] = content
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ArchiveError(f"not a readable tar archive: {exc}") from exc
    return files


def _zip_members(data: bytes, max_bytes: int) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                name = _safe_name(info.filename)
                if info.is_dir():
                    continue
                mode = info.external_attr >> 16
                if mode and not stat.S_ISREG(mode):
                    raise ArchiveError(f"archive member {info.filename!r} is not a regular file")
                total += info.file_size
                if total > max_bytes:
                    raise ArchiveError(f"archive unpacks to more than {max_bytes} bytes")
                with archive.open(info) as handle:
                    content = handle.read(info.file_size + 1)
                if len(content) != info.file_size:
                    raise ArchiveError(f"archive member {info.filename!r} is not the size it says")
                files[name] = content
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as exc:
        raise ArchiveError(f"not a readable zip archive: {exc}") from exc
    return files


def archive_members(data: bytes, max_bytes: int) -> dict[str, bytes]:
    """The regular files of a tar/tar.gz/zip archive by normalised name (ArchiveError)."""
    if data[:4] == b"PK\x03\x04":
        return _zip_members(data, max_bytes)
    return _tar_members(data, max_bytes)


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


def inline_archive(data: bytes, max_bytes: int) -> bytes:
    """One self-contained ONNX model from an archive of one .onnx and its data (ArchiveError)."""
    files = archive_members(data, max_bytes)
    models = sorted(name for name in files if name.lower().endswith(".onnx"))
    if len(models) != 1:
        found = ", ".join(models) or "none"
        raise ArchiveError(f"the archive must hold exactly one .onnx file (found: {found})")
    onnx_name = models[0]
    try:
        model = onnx.load_model_from_string(files[onnx_name])
    except Exception as exc:  # protobuf DecodeError and friends all mean "not ONNX"
        raise ArchiveError(f"{onnx_name} in the archive is not a valid ONNX model: {exc}") from exc
    base = posixpath.dirname(onnx_name)
    for _, tensor in onnx_walk.tensors(model):
        info = _external(tensor)
        if info is None:
            continue
        tensor.raw_data = _tensor_bytes(tensor.name, info, base, files)
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT
    if model.ByteSize() > PROTOBUF_LIMIT:
        raise ArchiveError(
            f"{onnx_name} with its data is {model.ByteSize()} bytes, over ONNX's 2 GiB limit for "
            "one file; models this large are not supported yet"
        )
    inlined: bytes = model.SerializeToString()
    return inlined


def _tensor_bytes(name: str, info: dict[str, str], base: str, files: dict[str, bytes]) -> bytes:
    location = info.get("location", "")
    if not location:
        raise ArchiveError(f"tensor {name!r} says its data is external but names no file")
    if location.startswith("/") or ".." in location.replace("\\", "/").split("/"):
        raise ArchiveError(
            f"tensor {name!r} points at {location!r}, outside the model's folder: refused"
        )
    member = _safe_name(posixpath.join(base, location))
    content = files.get(member)
    if content is None:
        raise ArchiveError(
            f"tensor {name!r} keeps its data in {location!r}, which the archive lacks"
        )
    try:
        offset = int(info.get("offset", "0"))
        length = int(info["length"]) if "length" in info else len(content) - offset
    except ValueError as exc:
        raise ArchiveError(f"tensor {name!r} has a malformed offset or length: {exc}") from exc
    if offset < 0 or length < 0 or offset + length > len(content):
        raise ArchiveError(
            f"tensor {name!r} reads bytes {offset}..{offset + length} of {location!r}, "
            f"which has {len(content)}"
        )
    return content[offset : offset + length]
