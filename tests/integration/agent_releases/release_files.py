"""Agent release files built in code: a Debian package (an ``ar`` archive, as dpkg-deb writes
it) and a release tree as a ``.tar.gz`` with ``release.json`` at its top."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path
from typing import Any


def _tar_gz(files: dict[str, bytes]) -> bytes:
    """The same files give the same bytes (gzip's timestamp fixed)."""
    out = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755 if name.endswith("jetfleet-agent") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _ar(members: list[tuple[str, bytes]]) -> bytes:
    out = bytearray(b"!<arch>\n")
    for name, data in members:
        header = f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}".encode() + b"`\n"
        assert len(header) == 60
        out += header + data
        if len(data) % 2:
            out += b"\n"
    return bytes(out)


def deb(
    version: str = "0.3.0",
    arch: str = "amd64",
    package: str = "jetfleet-agent",
    python: str = "3.10",
    payload: bytes = b"",
) -> bytes:
    """A jetfleet-agent .deb: ``control`` as nfpm writes it, ``payload`` in its data."""
    control = (
        f"Package: {package}\nVersion: {version}\nArchitecture: {arch}\n"
        f"Maintainer: Jetfleet <ops@example.com>\nDepends: python{python}, systemd\n"
        "Description: Jetfleet agent\n"
    ).encode()
    return _ar(
        [
            ("debian-binary", b"2.0\n"),
            ("control.tar.gz", _tar_gz({"./control": control})),
            ("data.tar.gz", _tar_gz({"./opt/jetfleet/agent/bin/jetfleet-agent": payload})),
        ]
    )


def tree(version: str = "0.3.0", arch: str = "x86_64", payload: bytes = b"", **extra: Any) -> bytes:
    """A release tree as .tar.gz: ``release.json`` and the entry it names."""
    meta = {
        "version": version,
        "arch": arch,
        "python": "3.10",
        "jetpack": ["6"],
        "entry": "bin/jetfleet-agent",
        **extra,
    }
    return _tar_gz(
        {
            f"jetfleet-agent-{version}/release.json": json.dumps(meta).encode(),
            f"jetfleet-agent-{version}/bin/jetfleet-agent": b"#!/bin/sh\n" + payload,
        }
    )


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
