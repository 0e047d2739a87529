"""A bench result names the code that ran: the commit of a checkout (and whether it had changes),
or the commit written beside a ``git archive`` copy, even where that copy sits inside another
checkout (as on the GPU host, whose working tree is a copy of ours at some other commit)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.provenance import revision


def git(where: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def checkout(where: Path) -> str:
    where.mkdir(parents=True)
    git(where, "init", "-q")
    (where / "agent").mkdir()
    (where / "agent" / "x.py").write_text("A = 1\n")
    git(where, "add", "-A")
    git(where, "commit", "-q", "-m", "first")
    return git(where, "rev-parse", "--short", "HEAD")


def test_a_clean_checkout_names_its_commit_and_a_changed_one_says_where(tmp_path: Path) -> None:
    head = checkout(tmp_path / "repo")
    assert revision(root=tmp_path / "repo") == head
    (tmp_path / "repo" / "agent" / "x.py").write_text("A = 2\n")
    assert revision(root=tmp_path / "repo") == f"{head} with uncommitted changes in agent/"


def test_an_archive_inside_another_checkout_names_the_commit_written_beside_it(
    tmp_path: Path,
) -> None:
    outer = checkout(tmp_path / "host-copy")
    snapshot = tmp_path / "host-copy" / ".snap"
    snapshot.mkdir()
    (snapshot / ".revision").write_text("abc1234\n")
    assert revision(root=snapshot) == "abc1234 (archive)"
    assert outer not in revision(root=snapshot)


def test_an_archive_without_its_commit_is_unknown(tmp_path: Path) -> None:
    checkout(tmp_path / "host-copy")
    snapshot = tmp_path / "host-copy" / "snap"
    snapshot.mkdir()
    assert revision(root=snapshot) == "unknown"
