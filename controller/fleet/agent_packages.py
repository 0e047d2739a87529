"""What a pushed agent release says of itself, read from its file (pure file reading).

Two formats: the ``jetfleet-agent`` Debian package (an ``ar`` archive whose ``control.tar.*``
holds the ``control`` file: ``Package`` must be jetfleet-agent, ``Version`` without epoch and
Debian revision is the release, ``Architecture`` arm64 → aarch64, amd64 → x86_64, the
``pythonX.Y`` in ``Depends`` the Python it runs on, which on aarch64 names its JetPack line),
or the release tree the package installs as a ``.tar.gz`` with ``release.json`` at its top
(``{"version", "arch", "python", "jetpack", "entry"}``). Anything else is refused with
:class:`InvalidInput` naming what is wrong.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final

from controller.errors import InvalidInput
from shared.agent_releases import AGENT_ARTIFACT_NAME, control_fields, deb_version
from shared.wire_model import VERSION_PATTERN

DEB_ARCHES: Final = {"arm64": "aarch64", "amd64": "x86_64"}
ARCHES: Final = frozenset({"aarch64", "x86_64"})
JETPACK_PYTHONS: Final = {"3.8": "5", "3.10": "6", "3.12": "7"}
"""The system Python of each JetPack line (Ubuntu 20.04, 22.04, 24.04)."""
MAX_META_BYTES: Final = 64 * 1024
"""The largest ``control`` file or ``release.json`` read."""
_AR_MAGIC: Final = b"!<arch>\n"
_GZIP_MAGIC: Final = b"\x1f\x8b"


@dataclass(frozen=True)
class ReleaseMeta:
    """A release's own account of itself."""

    version: str
    arch: str
    format: str
    """``deb`` or ``tar.gz``."""
    python: str | None = None
    jetpack: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


def read_release(path: Path) -> ReleaseMeta:
    """The metadata of the release file at ``path`` (:class:`InvalidInput` when unreadable)."""
    with open(path, "rb") as f:
        head = f.read(8)
        f.seek(0)
        if head == _AR_MAGIC:
            return _from_control(_deb_control(f))
        if head[:2] == _GZIP_MAGIC:
            return _from_release_json(_tree_release_json(f))
    raise InvalidInput(
        "not an agent release: push the jetfleet-agent .deb (an ar archive) or the release "
        "tree as a .tar.gz with release.json at its top"
    )


def _deb_control(f: BinaryIO) -> str:
    """The ``control`` file of the Debian package read from ``f``."""
    f.seek(len(_AR_MAGIC))
    while True:
        header = f.read(60)
        if len(header) < 60:
            raise InvalidInput("the .deb has no control.tar member: not a Debian package")
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        try:
            size = int(header[48:58].decode("ascii").strip())
        except ValueError as exc:
            raise InvalidInput("the .deb's ar header is malformed") from exc
        if name.startswith("control.tar"):
            if size > 16 * 1024 * 1024:
                raise InvalidInput(f"the .deb's {name} is larger than 16 MiB")
            member = f.read(size)
            return _control_from_tar(name, member)
        f.seek(size + (size % 2), io.SEEK_CUR)


def _control_from_tar(name: str, data: bytes) -> str:
    if name.endswith(".zst"):
        raise InvalidInput(
            f"the .deb's {name} is zstd-compressed, which this controller cannot read: "
            "build the package with packaging/build-deb.sh (gzip or xz)"
        )
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            for member in tar:
                if member.isfile() and member.name.lstrip("./") == "control":
                    if member.size > MAX_META_BYTES:
                        raise InvalidInput("the .deb's control file is too large")
                    extracted = tar.extractfile(member)
                    if extracted is not None:
                        return extracted.read().decode("utf-8", "replace")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise InvalidInput(f"the .deb's {name} is not a readable tar archive: {exc}") from exc
    raise InvalidInput(f"the .deb's {name} holds no control file")


def _from_control(text: str) -> ReleaseMeta:
    fields = control_fields(text)
    if fields.get("Package") != AGENT_ARTIFACT_NAME:
        raise InvalidInput(
            f"the package is {fields.get('Package')!r}, not {AGENT_ARTIFACT_NAME}: push the "
            "agent package"
        )
    arch = DEB_ARCHES.get(fields.get("Architecture", ""))
    if arch is None:
        raise InvalidInput(
            f"the package's architecture {fields.get('Architecture')!r} is not arm64 or amd64"
        )
    version = _version(deb_version(fields.get("Version", "")), "the package's Version")
    found = re.search(r"\bpython(3\.\d{1,2})\b", fields.get("Depends", ""))
    python = found.group(1) if found else None
    line = JETPACK_PYTHONS.get(python or "") if arch == "aarch64" else None
    details = {k: v for k, v in fields.items() if k in ("Version", "Depends", "Maintainer")}
    return ReleaseMeta(version, arch, "deb", python, (line,) if line else (), details)


def _tree_release_json(f: BinaryIO) -> bytes:
    """``release.json`` at the top of the release tree (or of its one top directory)."""
    try:
        with tarfile.open(fileobj=f, mode="r:gz") as tar:
            for member in tar:
                parts = [p for p in member.name.split("/") if p not in ("", ".")]
                if not member.isfile() or not parts or parts[-1] != "release.json":
                    continue
                if len(parts) > 2:
                    continue
                if member.size > MAX_META_BYTES:
                    raise InvalidInput(f"release.json is larger than {MAX_META_BYTES} bytes")
                extracted = tar.extractfile(member)
                if extracted is not None:
                    return extracted.read()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise InvalidInput(f"not a readable .tar.gz release tree: {exc}") from exc
    raise InvalidInput("the .tar.gz has no release.json at its top: not an agent release tree")


def _from_release_json(data: bytes) -> ReleaseMeta:
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise InvalidInput(f"release.json is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise InvalidInput("release.json is not a JSON object")
    arch = DEB_ARCHES.get(str(doc.get("arch")), doc.get("arch"))
    if arch not in ARCHES:
        raise InvalidInput(f"release.json: arch {doc.get('arch')!r} is not aarch64 or x86_64")
    entry = doc.get("entry")
    if not isinstance(entry, str) or not entry:
        raise InvalidInput("release.json: entry (the executable in the tree) is missing")
    python = doc.get("python")
    if python is not None and not isinstance(python, str):
        raise InvalidInput("release.json: python must be a string such as 3.10")
    jetpack = doc.get("jetpack") or []
    if isinstance(jetpack, str):
        jetpack = [jetpack]
    if not isinstance(jetpack, list) or not all(isinstance(j, (str, int)) for j in jetpack):
        raise InvalidInput("release.json: jetpack must be a list of JetPack lines")
    version = _version(doc.get("version"), "release.json: version")
    details = {k: v for k, v in doc.items() if k not in ("version", "arch", "python", "jetpack")}
    return ReleaseMeta(
        version, str(arch), "tar.gz", python, tuple(str(j) for j in jetpack), details
    )


def _version(value: object, what: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(VERSION_PATTERN, value):
        raise InvalidInput(f"{what} {value!r} is not a release version such as 0.3.0")
    return value
