"""Which archive members may be written into a release tree, and where. Pure.

Nothing trusts a name, a link or a mode from the network: a member's name must be a relative
path of plain parts (no absolute path, no ``..``, no empty or ``.`` parts once normalised), a
symbolic link must resolve inside the tree, and only regular files, directories and symbolic
links are accepted (no device files, FIFOs or hard links). Modes keep only the permission bits
a release needs (no setuid, setgid, sticky, group or other write).

The ``.deb`` maps ``opt/jetfleet/venv/...`` to ``venv/...`` and ``opt/jetfleet/python/...`` to
``python/...`` and drops everything else; its absolute links into those folders become
relative, and the venv's link to the system interpreter (``/usr/bin/python3.X``) is the one
absolute link allowed.
"""

from __future__ import annotations

import posixpath
import re
from typing import Final

MAX_MEMBERS: Final = 200_000
MAX_TOTAL_BYTES: Final = 8 << 30
"""A release larger than this is refused (the agent's venv with its wheels is ~0.5 GiB)."""

DEB_ROOTS: Final = {"opt/jetfleet/venv": "venv", "opt/jetfleet/python": "python"}
"""Folders of the package that make a release, and their place in the tree."""

SYSTEM_PYTHON = re.compile(r"^/usr/bin/python3(\.\d{1,2})?$")


class UnsafeMember(ValueError):
    """An archive member that would write outside the tree, or is not a plain file/dir/link."""


def member_path(name: str) -> str | None:
    """``name`` as a normalised relative path; None for the root itself (``.``, ``./``).

    :class:`UnsafeMember` for an absolute name, a ``..`` part or a control character.
    """
    if not name or len(name) > 4096 or any(ord(c) < 32 for c in name) or "\\" in name:
        raise UnsafeMember(f"archive member name {name[:80]!r} is not a plain path")
    if name.startswith("/"):
        raise UnsafeMember(f"archive member {name[:200]!r} has an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeMember(f"archive member {name[:200]!r} climbs out with '..'")
    return "/".join(parts) or None


def deb_member_path(name: str) -> str | None:
    """Where a member of the package's data tar goes in the tree; None to skip it."""
    path = member_path(name)
    if path is None:
        return None
    for root, place in DEB_ROOTS.items():
        if path == root:
            return place
        if path.startswith(root + "/"):
            return place + path[len(root) :]
    return None


def relocate_deb_link(target: str) -> str | None:
    """The tree path of an absolute link target of the package into its release folders
    (``/opt/jetfleet/python/bin/python3`` → ``python/bin/python3``); None for another one."""
    for root, place in DEB_ROOTS.items():
        if target == "/" + root or target.startswith("/" + root + "/"):
            return place + target[len(root) + 1 :]
    return None


def link_target(path: str, target: str, *, deb: bool = False) -> str:
    """The target to write for link ``path`` → ``target``: one resolving inside the tree.

    An absolute target is refused, except in the package (``deb``): one into its release
    folders is made relative (:func:`relocate_deb_link`), and the system interpreter the venv
    is made from (``/usr/bin/python3.X``) is kept.
    """
    if not target or len(target) > 4096 or any(ord(c) < 32 for c in target):
        raise UnsafeMember(f"link {path!r} has no plain target")
    base = posixpath.dirname(path)
    if target.startswith("/"):
        if deb and SYSTEM_PYTHON.match(target):
            return target
        relocated = relocate_deb_link(target) if deb else None
        if relocated is None:
            raise UnsafeMember(f"link {path!r} points outside the release ({target[:200]!r})")
        resolved = posixpath.normpath(relocated)
    else:
        resolved = posixpath.normpath(posixpath.join(base, target))
    if resolved == ".." or resolved.startswith(("../", "/")):
        raise UnsafeMember(f"link {path!r} points outside the release ({target[:200]!r})")
    return posixpath.relpath(resolved, base or ".")


def file_mode(mode: int) -> int:
    """The mode a file gets: 0755 when the archive made it executable, else 0644."""
    return 0o755 if mode & 0o111 else 0o644


def check_total(members: int, total_bytes: int) -> None:
    """:class:`UnsafeMember` once an archive holds more than a release could."""
    if members > MAX_MEMBERS:
        raise UnsafeMember(f"the archive holds more than {MAX_MEMBERS} members")
    if total_bytes > MAX_TOTAL_BYTES:
        raise UnsafeMember(f"the archive unpacks to more than {MAX_TOTAL_BYTES >> 30} GiB")
