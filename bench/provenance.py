"""Where a bench result came from, written by the bench itself under each result: the commit
(and whether the code it measures differed from it), the machine, its load when the run began,
and the exact command. A figure in README or docs/benchmarks.md cites such a block; nothing in
``bench/results/`` is typed in by hand."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = ("agent", "controller", "shared", "packaging", "bench")


def revision(paths: tuple[str, ...] = CODE, root: Path = ROOT) -> str:
    """``abc1234``, or ``abc1234 with uncommitted changes in agent/, ...`` where the measured
    code differs from the commit; where ``root`` is not the top of a git checkout,
    ``abc1234 (archive)`` from a ``.revision`` file at the top (``git rev-parse --short HEAD >
    SNAPSHOT/.revision`` next to ``git archive``), else ``unknown``. An archive unpacked inside
    another checkout (the GPU host's copy of a working tree) still counts as an archive: that
    checkout's commit is not the code that ran."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
            )
        except (OSError, subprocess.CalledProcessError):
            return ""
        return done.stdout.strip()

    top = git("rev-parse", "--show-toplevel")
    if not top or Path(top).resolve() != root.resolve():
        stamp = root / ".revision"
        return f"{stamp.read_text().strip()} (archive)" if stamp.is_file() else "unknown"
    head = git("rev-parse", "--short", "HEAD")
    # results are what runs write, not code they measure
    scope = ("--", *paths, ":!bench/results")
    changed = git("diff", "--name-only", "HEAD", *scope).splitlines()
    changed += git("ls-files", "--others", "--exclude-standard", *scope).splitlines()
    dirty = sorted({name.split("/")[0] + "/" for name in changed})
    return head + (f" with uncommitted changes in {', '.join(dirty)}" if dirty else "")


def machine() -> str:
    """``host (2 CPUs, Python 3.11.7, load 1.20)``: the load average of the last minute when the
    run began, since the machines are shared and absolute times move with it."""
    try:
        load = f", load {os.getloadavg()[0]:.2f}"
    except OSError:
        load = ""
    return f"{platform.node()} ({os.cpu_count()} CPUs, Python {platform.python_version()}{load})"


def command() -> str:
    """The command line this run was started with, as it could be typed again."""
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(ROOT):
        script = script.relative_to(ROOT)
    return shlex.join(["python", str(script), *sys.argv[1:]])


class Provenance:
    """Taken when the run begins (commit, machine and load then), written under its result."""

    def __init__(self, paths: tuple[str, ...] = CODE) -> None:
        self.started = datetime.now(timezone.utc)
        self.revision = revision(paths)
        self.machine = machine()
        self.command = command()

    def block(self) -> str:
        """Markdown lines for the results file."""
        return (
            f"- started: {self.started:%Y-%m-%d %H:%M} UTC, "
            f"ended: {datetime.now(timezone.utc):%H:%M} UTC\n"
            f"- commit: {self.revision}\n"
            f"- machine: {self.machine}\n"
            f"- command: `{self.command}`\n"
        )
