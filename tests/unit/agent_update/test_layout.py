"""The releases directory: links switched atomically, boot-counting files, pruning."""

from __future__ import annotations

import os
from pathlib import Path

from agent.update.layout import Pending, ReleaseLayout, key_values
from agent.update.release_meta import ReleaseInfo, canonical_bytes


def tree(layout: ReleaseLayout, version: str) -> None:
    layout.tree(version).mkdir(parents=True)
    info = ReleaseInfo(version=version, arch="x86_64", python="3.11", entry="bin/a")
    (layout.tree(version) / "release.json").write_bytes(canonical_bytes(info))


def test_switching_keeps_the_running_release_as_previous(tmp_path: Path) -> None:
    layout = ReleaseLayout(tmp_path / "r")
    tree(layout, "0.3.0")
    tree(layout, "0.4.0")
    layout.switch("0.3.0", Pending("0.3.0", 100))
    assert (layout.current(), layout.previous()) == ("0.3.0", None)  # previous: the factory one
    layout.switch("0.4.0", Pending("0.4.0", 200, max_starts=5))
    assert (layout.current(), layout.previous()) == ("0.4.0", "0.3.0")
    assert os.readlink(layout.root / "current") == "trees/0.4.0"  # relative: the dir may move
    assert layout.pending() == Pending("0.4.0", 200, 5)
    assert (layout.root / "attempts").read_text() == "0\n"


def test_only_the_pending_release_confirms(tmp_path: Path) -> None:
    layout = ReleaseLayout(tmp_path / "r")
    tree(layout, "0.3.0")
    layout.switch("0.3.0", Pending("0.3.0", 100))
    layout.confirm("0.2.0")
    assert layout.pending() is not None
    layout.confirm("0.3.0")
    assert layout.pending() is None
    assert not (layout.root / "attempts").exists()


def test_a_link_to_an_incomplete_tree_names_no_release(tmp_path: Path) -> None:
    layout = ReleaseLayout(tmp_path / "r")
    (layout.trees / "0.3.0").mkdir(parents=True)
    os.symlink("trees/0.3.0", layout.root / "current")
    assert layout.current() is None


def test_prune_keeps_current_and_previous_only(tmp_path: Path) -> None:
    layout = ReleaseLayout(tmp_path / "r")
    for version in ("0.2.9", "0.3.0", "0.4.0"):
        tree(layout, version)
    (layout.trees / ".partial-0.5.0").mkdir()
    layout.switch("0.3.0", Pending("0.3.0", 1))
    layout.switch("0.4.0", Pending("0.4.0", 1))
    layout.prune()
    assert sorted(p.name for p in layout.trees.iterdir()) == ["0.3.0", "0.4.0"]


def test_the_launchers_files_are_key_value_lines() -> None:
    text = "version=0.4.0\nreason=a=b, c\nat=12\njunk\n"
    assert key_values(text) == {"version": "0.4.0", "reason": "a=b, c", "at": "12"}
