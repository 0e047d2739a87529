"""Prepare a release before the switch: download → verify → unpack → self-check.

Runs on a worker thread of its own (a self-check may take tens of seconds; the reconcile loop
goes on serving and reporting). Each phase is handed to ``report(phase, error)`` before it
starts, which journals and publishes it. The download resumes a partial file across restarts
(:class:`agent.link.downloader.Downloader`, under ``<state_dir>/agent-update/``); a transient
failure (network, 5xx) is retried every :data:`RETRY_S` until it succeeds or the agent stops;
the archive is deleted once the update ends (:meth:`Installer.forget_downloads`).
Nothing here touches ``current``: a release that fails any step leaves the running one as it
is (phase ``failed`` or ``refused``).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent.checkpoints import reached
from agent.errors import AgentError, DownloadError
from agent.link.downloader import Downloader
from agent.service.self_check import check_release
from agent.trust.verifier import ArtifactRefused, ArtifactVerifier
from agent.update.archives import ArchiveError, unpack
from agent.update.layout import ReleaseLayout
from agent.update.release_meta import ReleaseMetaError, unsupported
from agent.update.unpack_rules import UnsafeMember
from shared.agent_releases import AgentReleaseOrder
from shared.messages import ArtifactRef

log = logging.getLogger(__name__)

RETRY_S: Final = 15.0
DOWNLOAD_DIR: Final = "agent-update"

Report = Callable[[str, "str | None"], None]


class Unsupported(Exception):
    """The release does not fit this device (architecture, JetPack line)."""


class Stopped(Exception):
    """The agent is stopping: the work ends where it is (it resumes at the next start)."""


@dataclass(frozen=True)
class Device:
    """What a release must fit."""

    arch: str
    jetpack: str | None


@dataclass
class Installer:
    """Prepares releases in ``layout`` for one device."""

    state_dir: Path
    layout: ReleaseLayout
    verifier: ArtifactVerifier
    device: Device
    check_args: list[str]
    """The running agent's options (``--config PATH``), given to the new release's check."""
    make_downloader: Callable[[Path], Downloader]
    stopping: Callable[[], bool]

    def prepare(self, order: AgentReleaseOrder, report: Report) -> bool:
        """True when release ``order.version`` is unpacked and checked (ready to switch);
        False after reporting ``failed`` or ``refused``. :class:`Stopped` when the agent
        stops meanwhile."""
        try:
            self._prepare(order, report)
        except (ArtifactRefused, Unsupported) as exc:
            report("refused", str(exc))
            return False
        except (ArchiveError, UnsafeMember, ReleaseMetaError, AgentError, OSError) as exc:
            report(
                "failed", f"{type(exc).__name__}: {exc}" if isinstance(exc, OSError) else str(exc)
            )
            return False
        return True

    def _prepare(self, order: AgentReleaseOrder, report: Report) -> None:
        report("downloading", None)
        archive = self._download(order, report)
        report("verifying", None)
        self.verifier.check_agent_release(order.version, order.artifact)
        report("unpacking", None)
        info = unpack(
            archive, order.artifact.format, self.layout.trees, order.version, self._unpacking
        )
        why = unsupported(info, self.device.arch, self.device.jetpack)
        if why is not None:
            raise Unsupported(why)
        report("checking", None)
        answer = check_release(self.layout.tree(order.version) / info.entry, self.check_args)
        if answer.problems:
            raise ReleaseMetaError(
                f"release {order.version} failed its self-check: " + "; ".join(answer.problems)
            )
        if answer.version != order.version:
            raise ReleaseMetaError(
                f"release {order.version} runs as agent version {answer.version}: "
                "its package metadata and its code disagree"
            )

    def forget_downloads(self) -> None:
        """Delete downloaded release archives (the update ended; a new one downloads again)."""
        shutil.rmtree(self.state_dir / DOWNLOAD_DIR, ignore_errors=True)

    def _progress(self) -> None:
        if self.stopping():
            raise Stopped

    def _download(self, order: AgentReleaseOrder, report: Report) -> Path:
        artifact = order.artifact
        ref = ArtifactRef(url=artifact.url, sha256=artifact.sha256, size=artifact.size)
        downloader = self.make_downloader(self.state_dir / DOWNLOAD_DIR)
        try:
            while True:
                try:
                    return downloader.fetch(ref, on_progress=self._downloading)
                except DownloadError as exc:
                    log.warning("agent release %s: %s", order.version, exc)
                    report("downloading", str(exc))
                    deadline = time.monotonic() + RETRY_S
                    while time.monotonic() < deadline:
                        self._progress()
                        time.sleep(0.25)
        finally:
            downloader.close()

    def _unpacking(self) -> None:
        reached("update:unpack", self.state_dir)
        self._progress()

    def _downloading(self) -> None:
        reached("update:download", self.state_dir)
        self._progress()
