"""Release archives into trees: real tar.gz and .deb files written here, unpacked for real."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from agent.update.archives import ArchiveError, unpack
from agent.update.release_meta import ReleaseMetaError
from agent.update.unpack_rules import UnsafeMember

RELEASE = {"version": "0.3.0", "arch": "x86_64", "python": "3.11", "entry": "bin/run"}
Entry = tuple[str, bytes | str | None, int]  # name, bytes (file) / str (link) / None (dir), type


def tar_bytes(entries: list[Entry], mode: str = "w:gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:  # type: ignore[call-overload]
        for name, content, kind in entries:
            info = tarfile.TarInfo(name)
            info.type = bytes([kind]) if isinstance(kind, int) else kind
            if isinstance(content, bytes):
                info.size = len(content)
                info.mode = 0o755 if name.endswith(("run", "jetfleet-agent", "python3")) else 0o644
                tar.addfile(info, io.BytesIO(content))
            else:
                if isinstance(content, str):
                    info.linkname = content
                info.mode = 0o755
                tar.addfile(info)
    return buffer.getvalue()


FILE, DIR, SYM, LNK, CHR = (ord(t) for t in (tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE,
                                             tarfile.LNKTYPE, tarfile.CHRTYPE))  # fmt: skip


def release_tar(extra: list[Entry] = (), **change: str) -> bytes:  # type: ignore[assignment]
    meta = json.dumps(RELEASE | change).encode()
    return tar_bytes(
        [
            ("./release.json", meta, FILE),
            ("./bin", None, DIR),
            ("./bin/run", b"#!/bin/sh\n", FILE),
            *list(extra),
        ]
    )


def write(tmp_path: Path, data: bytes, name: str = "r.tar.gz") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_release_tree_lands_complete_under_its_version(tmp_path: Path) -> None:
    extra: list[Entry] = [("./lib", None, DIR), ("./lib/a.py", b"x = 1\n", FILE),
                          ("./lib/link.py", "a.py", SYM)]  # fmt: skip
    info = unpack(write(tmp_path, release_tar(extra)), "tar.gz", tmp_path / "trees", "0.3.0")
    tree = tmp_path / "trees" / "0.3.0"
    assert info.version == "0.3.0"
    assert os.access(tree / "bin" / "run", os.X_OK)
    assert os.readlink(tree / "lib" / "link.py") == "a.py"
    assert '  "entry": "bin/run",\n' in (tree / "release.json").read_text()
    assert sorted(p.name for p in (tmp_path / "trees").iterdir()) == ["0.3.0"]


@pytest.mark.parametrize(
    "bad",
    [
        ("/etc/evil", b"x", FILE),
        ("../evil", b"x", FILE),
        ("./lib/../../evil", b"x", FILE),
        ("./out", "../../etc", SYM),
        ("./abs", "/etc/passwd", SYM),
        ("./dev", None, CHR),
        ("./hard", "release.json", LNK),
    ],
)
def test_unsafe_members_refuse_the_whole_release(tmp_path: Path, bad: Entry) -> None:
    with pytest.raises(UnsafeMember):
        unpack(write(tmp_path, release_tar([bad])), "tar.gz", tmp_path / "trees", "0.3.0")
    assert list((tmp_path / "trees").iterdir()) == [], "nothing half-installed stays"
    assert not (tmp_path / "evil").exists()


def test_no_file_is_written_through_a_link(tmp_path: Path) -> None:
    extra: list[Entry] = [("./sub", None, DIR), ("./lnk", "sub", SYM), ("./lnk/x", b"x", FILE)]
    with pytest.raises(UnsafeMember, match="link"):
        unpack(write(tmp_path, release_tar(extra)), "tar.gz", tmp_path / "trees", "0.3.0")


def test_a_release_that_is_not_the_ordered_version_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ReleaseMetaError, match=r"holds release 0\.4\.0"):
        unpack(write(tmp_path, release_tar(version="0.4.0")), "tar.gz", tmp_path / "t", "0.3.0")
    with pytest.raises(ArchiveError, match="entry"):
        unpack(write(tmp_path, release_tar(entry="bin/nope")), "tar.gz", tmp_path / "t", "0.3.0")


def test_a_damaged_archive_is_an_archive_error(tmp_path: Path) -> None:
    data = release_tar()
    with pytest.raises(ArchiveError, match="damaged"):
        unpack(write(tmp_path, data[: len(data) // 2]), "tar.gz", tmp_path / "t", "0.3.0")


def test_an_existing_tree_of_that_version_is_replaced_whole(tmp_path: Path) -> None:
    trees = tmp_path / "trees"
    (trees / "0.3.0").mkdir(parents=True)
    (trees / "0.3.0" / "stale").write_text("old")
    unpack(write(tmp_path, release_tar()), "tar.gz", trees, "0.3.0")
    assert not (trees / "0.3.0" / "stale").exists()
    assert sorted(p.name for p in trees.iterdir()) == ["0.3.0"]


# --- the .deb ---------------------------------------------------------------------------------

CONTROL = b"""Package: jetfleet-agent
Version: 0.3.0-1
Architecture: amd64
Depends: python3.10, systemd
Description: Jetfleet gateway agent
"""


def ar(members: list[tuple[str, bytes]]) -> bytes:
    out = b"!<arch>\n"
    for name, data in members:
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode() + data
        out += b"\n" if len(data) % 2 else b""
    return out


def deb(
    data_entries: list[Entry], data_name: str = "data.tar.gz", control: bytes = CONTROL
) -> bytes:
    control_tar = tar_bytes([("./control", control, FILE)])
    mode = {"data.tar.gz": "w:gz", "data.tar.xz": "w:xz", "data.tar.zst": "w"}[data_name]
    return ar([("debian-binary", b"2.0\n"), ("control.tar.gz", control_tar),
               (data_name, tar_bytes(data_entries, mode))])  # fmt: skip


VENV: list[Entry] = [
    ("./opt/jetfleet/venv", None, DIR),
    ("./opt/jetfleet/venv/pyvenv.cfg", b"home = /usr/bin\nversion = 3.10.12\n", FILE),
    ("./opt/jetfleet/venv/bin", None, DIR),
    ("./opt/jetfleet/venv/bin/python", "/usr/bin/python3.10", SYM),
    ("./opt/jetfleet/venv/bin/python3", "python", SYM),
    (
        "./opt/jetfleet/venv/bin/jetfleet-agent",
        b"#!/opt/jetfleet/venv/bin/python\nimport x\n",
        FILE,
    ),
    ("./usr/bin/jetfleet-agent", "/opt/jetfleet/venv/bin/jetfleet-agent", SYM),
    ("./usr/lib/systemd/system/jetfleet-agent.service", b"[Unit]\n", FILE),
]


def test_the_package_gives_its_venv_relocated_and_an_entry(tmp_path: Path) -> None:
    trees = tmp_path / "trees"
    info = unpack(write(tmp_path, deb(VENV), "a.deb"), "deb", trees, "0.3.0")
    tree = trees / "0.3.0"
    assert (info.arch, info.python, info.python_bundled) == ("x86_64", "3.10", False)
    assert sorted(p.name for p in tree.iterdir()) == ["bin", "release.json", "venv"]
    assert os.readlink(tree / "venv" / "bin" / "python") == "/usr/bin/python3.10"
    script = (tree / "venv" / "bin" / "jetfleet-agent").read_text()
    assert script.startswith(f"#!{tree}/venv/bin/python\n")
    entry = (tree / "bin" / "jetfleet-agent").read_text()
    assert "venv/bin/python" in entry
    assert os.access(tree / "bin" / "jetfleet-agent", os.X_OK)


def test_a_package_with_bundled_python_points_its_venv_at_its_own_copy(tmp_path: Path) -> None:
    bundled: list[Entry] = [
        ("./opt/jetfleet/python/bin", None, DIR),
        ("./opt/jetfleet/python/bin/python3", b"\x7fELF", FILE),
        ("./opt/jetfleet/python/lib/python3.12", None, DIR),
        ("./opt/jetfleet/python/lib/python3.12/os.py", b"", FILE),
    ]
    venv = [
        (n, "/opt/jetfleet/python/bin/python3", SYM) if n.endswith("bin/python") else (n, c, k)
        for n, c, k in VENV
    ]
    venv[1] = ("./opt/jetfleet/venv/pyvenv.cfg", b"home = /opt/jetfleet/python/bin\n", FILE)
    control = CONTROL.replace(b"python3.10, ", b"")
    data = deb(bundled + venv, "data.tar.xz", control)
    info = unpack(write(tmp_path, data, "b.deb"), "deb", tmp_path / "trees", "0.3.0")
    tree = tmp_path / "trees" / "0.3.0"
    assert (info.python, info.python_bundled) == ("3.12", True)
    assert os.readlink(tree / "venv" / "bin" / "python") == "../../python/bin/python3"
    assert (tree / "venv" / "pyvenv.cfg").read_text() == f"home = {tree}/python/bin\n"


def test_a_zstd_package_says_how_to_build_one_this_agent_reads(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="zstd"):
        unpack(write(tmp_path, deb(VENV, "data.tar.zst"), "z.deb"), "deb", tmp_path / "t", "0.3.0")


def test_a_file_that_is_not_a_package_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="ar archive"):
        unpack(write(tmp_path, release_tar(), "c.deb"), "deb", tmp_path / "t", "0.3.0")
    lying = ar([("debian-binary", b"2.0\n")]).replace(b"4         `", b"999999    `")
    with pytest.raises(ArchiveError, match="past the file's end"):
        unpack(write(tmp_path, lying, "d.deb"), "deb", tmp_path / "t", "0.3.0")
