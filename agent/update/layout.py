"""The releases directory the agent and the launcher share (``packaging/scripts/agent-launch``).

::

    <releases>/trees/<version>/          complete release trees (release.json + entry)
    <releases>/trees/.partial-<version>/ while unpacking (deleted by the next attempt)
    <releases>/current  -> trees/<version>   what the launcher starts (absent: the factory
                                              release the .deb installed in /opt/jetfleet/venv)
    <releases>/previous -> trees/<version>   the rollback target (absent: the factory release)
    <releases>/pending      the unconfirmed release: version=, deadline= (epoch s), max_starts=
    <releases>/attempts     how many times the launcher started the pending release
    <releases>/rolled-back  the launcher's record of its last rollback: version=, reason=, at=

The directory belongs to the agent's user: switching needs no root. ``current`` and
``previous`` are replaced atomically (a new link renamed over the old); the files are written
with :func:`agent.durable_files.write_atomically`. The ``key=value`` files are what a POSIX sh
reads without parsing JSON.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent.durable_files import fsync_dir, write_atomically
from agent.update.archives import remove_tree
from agent.update.release_meta import RELEASE_FILE, ReleaseInfo, ReleaseMetaError
from agent.update.release_meta import parse_release_json as _parse

RELEASES_ENV: Final = "JETFLEET_RELEASES_DIR"
"""Set by the launcher for the agent it starts: where it looks for ``current``."""
LAUNCHER_ENV: Final = "JETFLEET_LAUNCHER"
"""Set by the launcher: its own path, which the agent executes to restart into a release."""
RELEASE_ENV: Final = "JETFLEET_RELEASE"
"""Set by the launcher: the release directory it started (``factory`` for the package's)."""
MAX_STARTS: Final = 3
"""Starts an unconfirmed release gets before the launcher switches back to ``previous``."""


@dataclass(frozen=True)
class Pending:
    """The release ``current`` names while it is unconfirmed."""

    version: str
    deadline: int
    """Epoch seconds; unconfirmed past it, the launcher switches back."""
    max_starts: int = MAX_STARTS


@dataclass(frozen=True)
class RolledBack:
    """What the launcher wrote when it switched back from ``version``."""

    version: str
    reason: str
    at: int


def key_values(text: str) -> dict[str, str]:
    """``key=value`` lines (the launcher's files)."""
    pairs = (line.partition("=") for line in text.splitlines())
    return {key.strip(): value.strip() for key, sep, value in pairs if sep}


class ReleaseLayout:
    """The releases directory ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.trees = root / "trees"

    def tree(self, version: str) -> Path:
        """Where release ``version`` lives once complete."""
        return self.trees / version

    def info(self, version: str) -> ReleaseInfo | None:
        """The metadata of complete release ``version``; None when it is absent or damaged."""
        try:
            return _parse((self.tree(version) / RELEASE_FILE).read_bytes())
        except (OSError, ReleaseMetaError):
            return None

    def _link(self, name: str) -> str | None:
        try:
            target = os.readlink(self.root / name)
        except OSError:
            return None
        version = Path(target).name
        return version if self.info(version) is not None else None

    def current(self) -> str | None:
        """The version ``current`` names (None: the factory release runs)."""
        return self._link("current")

    def previous(self) -> str | None:
        """The version ``previous`` names (None: the factory release)."""
        return self._link("previous")

    def _set_link(self, name: str, version: str | None) -> None:
        link = self.root / name
        if version is None:
            with contextlib.suppress(FileNotFoundError):
                link.unlink()
        else:
            tmp = self.root / f".{name}.tmp"
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            os.symlink(f"trees/{version}", tmp)
            os.replace(tmp, link)
        fsync_dir(self.root)

    def switch(
        self, version: str, pending: Pending, before_current: Callable[[], object] = lambda: None
    ) -> None:
        """Make ``version`` current and unconfirmed, the running ``current`` its rollback
        target. Order: pending first (a crash after it with ``current`` unchanged leaves a
        pending record the launcher ignores, as it names another release), then previous,
        then current (one rename)."""
        self.root.mkdir(parents=True, exist_ok=True)
        running = self.current()
        write_atomically(
            self.root / "pending",
            f"version={pending.version}\ndeadline={pending.deadline}\n"
            f"max_starts={pending.max_starts}\n".encode(),
        )
        write_atomically(self.root / "attempts", b"0\n")
        if running != version:
            self._set_link("previous", running)
        before_current()
        self._set_link("current", version)

    def pending(self) -> Pending | None:
        """The unconfirmed release, if any."""
        try:
            values = key_values((self.root / "pending").read_text())
            return Pending(values["version"], int(values["deadline"]), int(values["max_starts"]))
        except (OSError, KeyError, ValueError):
            return None

    def confirm(self, version: str) -> None:
        """``version`` is healthy: forget its boot counting (only if it is the pending one)."""
        pending = self.pending()
        if pending is None or pending.version != version:
            return
        for name in ("pending", "attempts"):
            with contextlib.suppress(FileNotFoundError):
                (self.root / name).unlink()
        fsync_dir(self.root)

    def rolled_back(self) -> RolledBack | None:
        """The launcher's last rollback record, if any."""
        try:
            values = key_values((self.root / "rolled-back").read_text())
            return RolledBack(values["version"], values.get("reason", ""), int(values["at"]))
        except (OSError, KeyError, ValueError):
            return None

    def prune(self) -> None:
        """Delete partial trees and every release that is neither current nor previous."""
        if not self.trees.is_dir():
            return
        keep = {self.current(), self.previous()}
        for child in self.trees.iterdir():
            if child.name not in keep:
                remove_tree(child)
