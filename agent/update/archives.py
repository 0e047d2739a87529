"""Unpack a release archive into ``trees/.partial-<version>``, check it, rename it into place.

Two formats: ``tar.gz`` (a release tree, ``release.json`` at its root) and the
``jetfleet-agent_X.Y.Z_<arch>.deb`` that ``packaging/build-deb.sh`` builds (an ``ar`` archive:
``control.tar.*`` gives ``release.json``, ``data.tar.*`` gives the venv and the bundled
Python). Both are read with the standard library as streams, member by member, under the
rules of :mod:`agent.update.unpack_rules`. Every file is fsynced, then the directories, then
the partial tree is renamed to ``trees/<version>``: a crash leaves a partial tree (deleted by
the next attempt) or a complete one, never a half-written release under its version's name.

A tree from the ``.deb`` is relocated: its venv's links into ``/opt/jetfleet/python`` and the
``home`` of ``pyvenv.cfg`` name the tree's own ``python/`` when the package bundles Python, the
venv's scripts' ``#!/opt/jetfleet/venv/bin/python`` lines name the tree's venv, and an entry
``bin/jetfleet-agent`` (a small sh script running the tree's venv) is written.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, BinaryIO, Final

from agent.durable_files import fsync_dir
from agent.update.release_meta import (
    RELEASE_FILE,
    ReleaseInfo,
    ReleaseMetaError,
    canonical_bytes,
    from_deb_control,
    parse_release_json,
)
from agent.update.unpack_rules import (
    UnsafeMember,
    check_total,
    deb_member_path,
    file_mode,
    link_target,
    member_path,
)

CHUNK: Final = 1 << 20
MAX_CONTROL_BYTES: Final = 1 << 20
FACTORY_VENV_SHEBANG: Final = b"#!/opt/jetfleet/venv/bin/python"
Progress = Callable[[], object]


class ArchiveError(ValueError):
    """The archive is not a release this agent can install; the message says why."""


class _Bounded(io.RawIOBase):
    """``size`` bytes of ``f`` from its current position, as a readable stream."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self._f = f
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._left <= 0:
            return 0
        data = self._f.read(min(len(buffer), self._left))
        self._left -= len(data)
        buffer[: len(data)] = data
        return len(data)


def ar_members(f: BinaryIO, file_size: int) -> Iterator[tuple[str, int]]:
    """(name, size) of each member of an ``ar`` archive; ``f`` is left at the member's data."""
    if f.read(8) != b"!<arch>\n":
        raise ArchiveError("not a .deb: the file does not start with an ar archive header")
    offset = 8
    while offset < file_size:
        f.seek(offset)
        header = f.read(60)
        if len(header) < 60 or header[58:60] != b"`\n":
            raise ArchiveError("not a .deb: a malformed ar member header")
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        raw_size = header[48:58].strip()
        if not raw_size.isdigit() or offset + 60 + int(raw_size) > file_size:
            raise ArchiveError(f"not a .deb: member {name!r} has a size past the file's end")
        size = int(raw_size)
        yield name, size
        offset += 60 + size + (size & 1)


def _member_tar(f: BinaryIO, size: int, name: str) -> tarfile.TarFile:
    """The tar archive in ``size`` bytes of ``f``, read as a stream."""
    stream = io.BufferedReader(_Bounded(f, size), CHUNK)
    if name.endswith(".tar.gz"):
        return tarfile.open(fileobj=stream, mode="r|gz")
    if name.endswith(".tar.xz"):
        return tarfile.open(fileobj=stream, mode="r|xz")
    if name.endswith(".tar"):
        return tarfile.open(fileobj=stream, mode="r|")
    if name.endswith(".tar.zst"):
        raise ArchiveError(
            f"{name} is zstd-compressed, which Python's standard library cannot read before "
            "3.14: build the package with gzip or xz (nfpm's deb.compression; gzip is its default)"
        )
    raise ArchiveError(f"not a .deb this agent can read: unknown member {name!r}")


class _Writer:
    """Writes members into ``root`` under the unpack rules; fsyncs files as it goes."""

    def __init__(self, root: Path, on_progress: Progress | None) -> None:
        self.root = root
        self._progress = on_progress
        self._members = 0
        self._bytes = 0
        self.dirs: set[Path] = {root}

    def member(self, tar: tarfile.TarFile, info: tarfile.TarInfo, path: str, deb: bool) -> None:
        self._members += 1
        self._bytes += max(info.size, 0)
        check_total(self._members, self._bytes)
        dest = self.root / path
        self._parent(dest)
        if info.isdir():
            dest.mkdir(mode=0o755, exist_ok=True)
            self.dirs.add(dest)
        elif info.issym():
            relative = link_target(path, info.linkname, deb=deb)
            with contextlib.suppress(FileNotFoundError):
                dest.unlink()
            os.symlink(relative, dest)
        elif info.isreg():
            source = tar.extractfile(info)
            if source is None:
                raise ArchiveError(f"member {path!r} has no data")
            self._file(dest, source, file_mode(info.mode))
        else:
            raise UnsafeMember(f"archive member {path!r} is not a file, directory or link")

    def _parent(self, dest: Path) -> None:
        """Create ``dest``'s missing parents; refuse a parent that is a link or a file."""
        current = self.root
        for part in dest.parent.relative_to(self.root).parts:
            current = current / part
            if current.is_symlink():
                raise UnsafeMember(f"{current.relative_to(self.root)} is a link, not a directory")
            if not current.exists():
                current.mkdir(mode=0o755)
                self.dirs.add(current)
            elif not current.is_dir():
                raise UnsafeMember(f"{current.relative_to(self.root)} is not a directory")

    def _file(self, dest: Path, source: IO[bytes], mode: int) -> None:
        if dest.is_symlink() or dest.is_dir():
            raise UnsafeMember(f"{dest.relative_to(self.root)} appears twice in the archive")
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as out:
            while chunk := source.read(CHUNK):
                out.write(chunk)
                if self._progress is not None:
                    self._progress()
            out.flush()
            os.fsync(out.fileno())
        os.chmod(dest, mode)

    def sync_dirs(self) -> None:
        for directory in sorted(self.dirs, key=lambda p: len(p.parts), reverse=True):
            fsync_dir(directory)


def _unpack_tar_gz(archive: Path, writer: _Writer) -> ReleaseInfo:
    with tarfile.open(archive, "r|gz") as tar:
        for info in tar:
            path = member_path(info.name)
            if path is not None:
                writer.member(tar, info, path, deb=False)
    try:
        data = (writer.root / RELEASE_FILE).read_bytes()
    except (FileNotFoundError, IsADirectoryError) as exc:
        raise ArchiveError(f"the archive has no {RELEASE_FILE} at its root") from exc
    return parse_release_json(data)


def _unpack_deb(archive: Path, writer: _Writer) -> ReleaseInfo:
    control: str | None = None
    data_seen = False
    size = archive.stat().st_size
    with archive.open("rb") as f:
        for name, member_size in ar_members(f, size):
            if name.startswith("control.tar"):
                if member_size > MAX_CONTROL_BYTES:
                    raise ArchiveError(f"{name} is larger than {MAX_CONTROL_BYTES} bytes")
                with _member_tar(f, member_size, name) as tar:
                    for info in tar:
                        if member_path(info.name) == "control" and info.isreg():
                            got = tar.extractfile(info)
                            control = got.read(MAX_CONTROL_BYTES).decode() if got else None
            elif name.startswith("data.tar"):
                data_seen = True
                with _member_tar(f, member_size, name) as tar:
                    for info in tar:
                        path = deb_member_path(info.name)
                        if path is not None:
                            writer.member(tar, info, path, deb=True)
    if control is None or not data_seen:
        raise ArchiveError("not a .deb: no control file or no data archive")
    if not (writer.root / "venv" / "pyvenv.cfg").is_file():
        raise ArchiveError("the package holds no /opt/jetfleet/venv: not jetfleet-agent's")
    return from_deb_control(control, _bundled_python(writer.root))


def _bundled_python(tree: Path) -> str | None:
    lib = tree / "python" / "lib"
    if not lib.is_dir():
        return None
    for child in sorted(lib.iterdir()):
        name = child.name
        if name.startswith("python3.") and (child / "os.py").is_file():
            return name[len("python") :]
    raise ArchiveError("the package bundles /opt/jetfleet/python without a standard library")


def relocate_deb_tree(tree: Path, final: Path, info: ReleaseInfo) -> None:
    """Make a tree unpacked from the .deb run from ``final`` (its path once renamed)."""
    venv = tree / "venv"
    if info.python_bundled:
        cfg = venv / "pyvenv.cfg"
        lines = [
            f"home = {final / 'python' / 'bin'}" if line.startswith("home") else line
            for line in cfg.read_text().splitlines()
        ]
        _rewrite(cfg, ("\n".join(lines) + "\n").encode(), 0o644)
    for script in sorted((venv / "bin").iterdir()):
        if script.is_symlink() or not script.is_file():
            continue
        with script.open("rb") as f:
            head = f.read(len(FACTORY_VENV_SHEBANG))
        if head == FACTORY_VENV_SHEBANG:
            body = script.read_bytes()
            new = f"#!{final / 'venv' / 'bin' / 'python'}".encode() + body[len(head) :]
            _rewrite(script, new, 0o755)
    entry = tree / info.entry
    entry.parent.mkdir(mode=0o755, exist_ok=True)
    _rewrite(
        entry,
        b"#!/bin/sh\n# The entry of a release unpacked from the jetfleet-agent package.\n"
        b'here=$(cd "$(dirname "$0")/.." && pwd)\n'
        b'exec "$here/venv/bin/python" -c \'import sys; sys.argv[0] = "jetfleet-agent"; '
        b'from agent.cli import main; main()\' "$@"\n',
        0o755,
    )
    fsync_dir(entry.parent)


def _rewrite(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _check_entry(tree: Path, info: ReleaseInfo) -> None:
    entry = tree / info.entry
    if entry.is_symlink() or not entry.is_file() or not os.access(entry, os.X_OK):
        raise ArchiveError(f"the release's entry {info.entry} is not an executable file")


def unpack(
    archive: Path, fmt: str, trees: Path, version: str, on_progress: Progress | None = None
) -> ReleaseInfo:
    """Unpack ``archive`` (``deb`` or ``tar.gz``) as release ``version`` into ``trees``.

    :class:`ArchiveError`, :class:`~agent.update.unpack_rules.UnsafeMember` or
    :class:`~agent.update.release_meta.ReleaseMetaError` when it cannot be installed (the
    partial tree is removed); the release's metadata once ``trees/<version>`` is complete.
    """
    trees.mkdir(parents=True, exist_ok=True)
    partial = trees / f".partial-{version}"
    final = trees / version
    remove_tree(partial)
    partial.mkdir(mode=0o755)
    writer = _Writer(partial, on_progress)
    try:
        try:
            if fmt == "deb":
                info = _unpack_deb(archive, writer)
                if info.version == version:
                    relocate_deb_tree(partial, final, info)
            elif fmt == "tar.gz":
                info = _unpack_tar_gz(archive, writer)
            else:
                raise ArchiveError(f"unknown release format {fmt!r}")
        except (tarfile.TarError, EOFError, OSError, UnicodeDecodeError) as exc:
            raise ArchiveError(f"the {fmt} archive is damaged: {exc}") from exc
        if info.version != version:
            raise ReleaseMetaError(
                f"the archive holds release {info.version}, the order names {version}"
            )
        _check_entry(partial, info)
        _rewrite(partial / RELEASE_FILE, canonical_bytes(info), 0o644)
        writer.sync_dirs()
    except BaseException:
        remove_tree(partial)
        raise
    if final.exists() or final.is_symlink():
        trash = trees / f".trash-{version}"
        remove_tree(trash)
        os.replace(final, trash)
        os.replace(partial, final)
        fsync_dir(trees)
        remove_tree(trash)
    else:
        os.replace(partial, final)
        fsync_dir(trees)
    return info


def remove_tree(path: Path) -> None:
    """Delete ``path`` (a tree, a link or a file) if it exists; a link is never followed."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
