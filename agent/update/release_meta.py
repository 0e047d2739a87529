"""What an agent release says of itself: ``release.json`` at the root of its tree. Pure.

A release tree holds ``release.json`` and the executable it names (``entry``, a path inside
the tree) that the launcher runs with the agent's arguments. The installer writes the file
again in :func:`canonical_bytes` form (one key per line), which the launcher (POSIX sh) reads
with ``sed``. A tree unpacked from the ``.deb`` gets its ``release.json`` from the package's
control file (:func:`from_deb_control`).
"""

from __future__ import annotations

import json
import re
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.agent_releases import AgentArch, control_fields, deb_version
from shared.wire_model import VERSION_PATTERN

RELEASE_FILE: Final = "release.json"
SCHEMA: Final = "jetfleet/agent-release/1"
DEB_ENTRY: Final = "bin/jetfleet-agent"
"""The entry the installer writes into a tree unpacked from the .deb."""
MAX_RELEASE_JSON: Final = 64 * 1024

ENTRY_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*){0,7}$"
"""A relative path of plain names (no ``..``, no leading ``/`` or ``.``, no quotes)."""

DEB_ARCHES: Final[dict[str, AgentArch]] = {"arm64": "aarch64", "amd64": "x86_64"}

JETPACK_PYTHONS: Final = {"3.8": "5", "3.10": "6", "3.12": "7"}
"""The system Python of each JetPack line (Ubuntu 20.04, 22.04, 24.04)."""


class ReleaseMetaError(ValueError):
    """``release.json`` or the package's control file is missing, malformed or unsupported."""


class ReleaseInfo(BaseModel):
    """The content of ``release.json``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_: Literal["jetfleet/agent-release/1"] = Field(default=SCHEMA, alias="schema")
    version: str = Field(pattern=VERSION_PATTERN)
    arch: AgentArch
    python: str = Field(pattern=r"^3\.\d{1,2}$", description="The Python X.Y the release runs.")
    python_bundled: bool = Field(
        default=False, description="The release carries its own interpreter (python/)."
    )
    jetpack: tuple[str, ...] = Field(
        default=(),
        max_length=8,
        description="JetPack major lines the release runs on; empty: any (x86, or bundled).",
    )
    entry: str = Field(pattern=ENTRY_PATTERN, max_length=200)


def parse_release_json(data: bytes) -> ReleaseInfo:
    """The release's metadata; :class:`ReleaseMetaError` naming what is wrong."""
    if len(data) > MAX_RELEASE_JSON:
        raise ReleaseMetaError(f"{RELEASE_FILE} is larger than {MAX_RELEASE_JSON} bytes")
    try:
        return ReleaseInfo.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise ReleaseMetaError(f"{RELEASE_FILE}: {where}: {first['msg']}") from exc


def canonical_bytes(info: ReleaseInfo) -> bytes:
    """``release.json`` as the installer writes it: one key per line, sorted."""
    data = info.model_dump(mode="json", by_alias=True)
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def from_deb_control(text: str, bundled_python: str | None) -> ReleaseInfo:
    """``release.json`` of a tree unpacked from the jetfleet-agent package.

    ``bundled_python``: the X.Y of the interpreter the package bundles (JetPack 5's build), or
    None when its venv links to the system's ``pythonX.Y`` named in ``Depends``.
    """
    fields = control_fields(text)
    if fields.get("Package") != "jetfleet-agent":
        raise ReleaseMetaError(
            f"the package is {fields.get('Package')!r}, not jetfleet-agent: push the agent package"
        )
    arch = DEB_ARCHES.get(fields.get("Architecture", ""))
    if arch is None:
        raise ReleaseMetaError(
            f"the package's architecture {fields.get('Architecture')!r} is not arm64 or amd64"
        )
    jetpack: tuple[str, ...] = ()
    if bundled_python is not None:
        python = bundled_python
    else:
        found = re.search(r"\bpython(3\.\d{1,2})\b", fields.get("Depends", ""))
        if found is None:
            raise ReleaseMetaError(
                "the package neither bundles Python nor depends on a pythonX.Y: "
                "build it with packaging/build-deb.sh"
            )
        python = found.group(1)
        line = JETPACK_PYTHONS.get(python) if arch == "aarch64" else None
        jetpack = (line,) if line else ()
    try:
        return ReleaseInfo(
            version=deb_version(fields.get("Version", "")),
            arch=arch,
            python=python,
            python_bundled=bundled_python is not None,
            jetpack=jetpack,
            entry=DEB_ENTRY,
        )
    except ValidationError as exc:
        raise ReleaseMetaError(f"the package's control file: {exc.errors()[0]['msg']}") from exc


def unsupported(info: ReleaseInfo, arch: str, jetpack: str | None) -> str | None:
    """Why this device cannot run the release (None: it can). ``jetpack``: the device's
    JetPack version (``6.2``) or None off a Jetson."""
    if info.arch != arch:
        return f"release {info.version} is built for {info.arch}, this device is {arch}"
    if info.jetpack and jetpack is not None and jetpack.split(".")[0] not in info.jetpack:
        lines = ", ".join(info.jetpack)
        return (
            f"release {info.version} runs on JetPack {lines} (Python {info.python}); "
            f"this device has JetPack {jetpack}"
        )
    return None
