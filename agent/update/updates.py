"""What the daemon calls: take the desired document's agent order, prepare it on a worker,
switch and restart on the loop, confirm or learn of a rollback after the restart.

The daemon's loop thread calls :meth:`AgentUpdates.resume` once at start (before the kept
desired document is applied), :meth:`AgentUpdates.order` with each accepted desired document's
``agent``, and :meth:`AgentUpdates.tick` every tick; a True from ``tick`` asks it to stop, after
which ``run_agent`` calls :meth:`AgentUpdates.restart_if_due` (``execv`` of the launcher).
Every phase is journalled (:mod:`agent.update.journal`), sent as an ``agent_update`` event and
reported in ``ReportedState.agent_update`` (:attr:`AgentUpdates.status`).

An agent that the launcher did not start (no ``$JETFLEET_LAUNCHER``: a development run, the
in-process test agent) cannot switch releases: its updates fail at once, saying so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from agent.checkpoints import reached
from agent.link.downloader import Downloader
from agent.link.http import controller_tls
from agent.service.lifecycle import ServiceNotifications
from agent.settings import AgentSettings
from agent.slots.events import EventPublisher
from agent.trust.verifier import ArtifactVerifier
from agent.update import journal as journal_file
from agent.update.decisions import (
    PRE_SWITCH,
    after_start,
    decide_order,
    ready_to_confirm,
    serving_names,
)
from agent.update.installer import Device, Installer, Stopped
from agent.update.journal import UpdateJournal
from agent.update.layout import LAUNCHER_ENV, RELEASES_ENV, Pending, ReleaseLayout
from agent.update.restart import exec_launcher, keep_listening
from shared.agent_releases import TERMINAL_PHASES, AgentReleaseOrder, AgentUpdateStatus
from shared.messages import SlotStatus

log = logging.getLogger(__name__)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Superseded(Stopped):
    """Another order replaced the one a worker prepares: it stops where it is."""


class AgentUpdates:
    """One agent's self-update."""

    def __init__(
        self,
        settings: AgentSettings,
        running: str,
        jetpack: str | None,
        verifier: ArtifactVerifier,
        events: EventPublisher,
        listening: Callable[[], socket.socket | None],
        stopping: Callable[[], bool],
        env: Mapping[str, str] = os.environ,
        argv: Sequence[str] = sys.argv,
    ) -> None:
        self._state_dir = settings.state_dir
        self._running = running
        self._events = events
        self._listening = listening
        self._launcher = env.get(LAUNCHER_ENV) or None
        self._args = list(argv[1:])
        self.layout = ReleaseLayout(Path(env.get(RELEASES_ENV) or settings.state_dir / "releases"))
        self._arch = platform.machine()
        token = settings.api_token.get_secret_value() if settings.api_token else None
        verify = controller_tls(settings.controller_ca_file)
        check_args = list(self._args[1:]) if self._args[:1] == ["run"] else []
        self._installer = Installer(
            settings.state_dir,
            self.layout,
            verifier,
            Device(self._arch, jetpack),
            check_args,
            lambda path: Downloader(path, settings.controller_url, token=token, verify=verify),
            stopping,
        )
        self._lock = threading.Lock()
        self._journal = journal_file.load(settings.state_dir)
        self._changed = False
        self._worker: threading.Thread | None = None
        self._restart_due = False

    @property
    def status(self) -> AgentUpdateStatus | None:
        """The latest update, as reported (None: there was none)."""
        journal = self._journal
        return journal.status() if journal is not None else None

    def take_changed(self) -> bool:
        """True once after the status changed (the daemon then publishes its report)."""
        with self._lock:
            changed, self._changed = self._changed, False
        return changed

    def _write(self, journal: UpdateJournal, only_for: AgentReleaseOrder | None = None) -> None:
        """Journal, report and announce ``journal``; with ``only_for``, only while the journal
        still carries that order (:class:`Superseded` otherwise)."""
        with self._lock:
            current = self._journal
            if only_for is not None and (current is None or not current.same_order(only_for)):
                raise Superseded
            journal_file.save(self._state_dir, journal)
            self._journal = journal
            self._changed = True
        if journal.phase in TERMINAL_PHASES:
            self._installer.forget_downloads()
        status = journal.status()
        message = f"agent {status.version}: {status.phase}"
        if status.error:
            message += f": {status.error}"
        log.log(logging.WARNING if status.error else logging.INFO, "%s", message)
        self._events.emit("agent_update", None, message, **status.model_dump(mode="json"))

    def _set(
        self,
        phase: str,
        error: str | None = None,
        only_for: AgentReleaseOrder | None = None,
        **changes: object,
    ) -> None:
        journal = self._journal
        assert journal is not None
        if (journal.phase, journal.error) == (phase, error) and not changes:
            if only_for is not None and not journal.same_order(only_for):
                raise Superseded
            return  # already there (e.g. downloading again after a restart): no new event
        update = {"phase": phase, "error": error, "at": _utcnow(), **changes}
        self._write(journal.model_copy(update=update), only_for)

    def resume(self) -> None:
        """At start: what the journal found means now (confirming, rolled back, start over)."""
        journal = self._journal
        if journal is None:
            return
        version = journal.order.version
        if journal.phase == "confirmed" and self._running == version:
            self.layout.confirm(version)  # a crash between the two writes of the confirmation
        resumed = after_start(
            journal, self._running, self.layout.current(), self.layout.rolled_back()
        )
        if resumed is not None:
            self._set(resumed.phase, resumed.error)
            if resumed.phase == "rolled_back":
                self.layout.prune()

    def order(self, order: AgentReleaseOrder | None) -> None:
        """The accepted desired document's order (None: none)."""
        decision = decide_order(order, self._running, self._arch, self._journal)
        if decision.action == "ignore" or order is None:
            return
        if decision.action == "keep":
            return  # in progress (tick goes on with it), or ended: never restarted
        fresh = UpdateJournal(
            order=order, phase="downloading", previous=self._running, at=_utcnow()
        )
        if decision.action == "refuse":
            self._write(fresh.model_copy(update={"phase": "refused", "error": decision.reason}))
        elif self._launcher is None:
            why = (
                "this agent was not started by the launcher (/usr/lib/jetfleet/agent-launch, "
                "the unit's ExecStart), so it cannot switch releases"
            )
            self._write(fresh.model_copy(update={"phase": "failed", "error": why}))
        else:
            self._write(fresh)
            self._start_worker(order)  # or at a tick, once a superseded worker has stopped

    def _start_worker(self, order: AgentReleaseOrder) -> None:
        if self._worker is not None and self._worker.is_alive():
            return
        self._worker = threading.Thread(
            target=self._prepare, args=(order,), name="agent-update", daemon=True
        )
        self._worker.start()

    def _prepare(self, order: AgentReleaseOrder) -> None:
        def report(phase: str, error: str | None) -> None:
            self._set(phase, error, only_for=order)  # Superseded by a newer order: stop

        try:
            if self._installer.prepare(order, report):
                report("switching", None)
            else:
                self.layout.prune()  # a refused or failed release's tree, if it got that far
        except Stopped:
            log.info(
                "agent update to %s stopped with the agent; it resumes at start", order.version
            )
        except Exception as exc:  # a bug must not leave the update silently stuck
            log.exception("agent update to %s failed", order.version)
            with contextlib.suppress(Superseded):
                report("failed", f"{type(exc).__name__}: {exc}")

    def tick(self, connected: bool, statuses: Sequence[SlotStatus]) -> bool:
        """On the loop thread: switch when prepared (True: stop now and restart), confirm when
        the new release is healthy."""
        journal = self._journal
        if journal is None or self._restart_due:
            return False
        version = journal.order.version
        worker_done = self._worker is None or not self._worker.is_alive()
        if journal.phase in PRE_SWITCH and worker_done and self._launcher is not None:
            self._start_worker(journal.order)  # resumed at start, or after a superseded one
            return False
        if journal.phase == "switching" and worker_done and self._launcher is not None:
            deadline = int(time.time()) + journal.order.confirm_within_s
            self.layout.switch(
                version,
                Pending(version, deadline),
                before_current=lambda: reached("update:switch", self._state_dir),
            )
            self._set("restarting", serving_before=serving_names(statuses))
            reached("update:restart", self._state_dir)
            keep_listening(self._listening())
            self._restart_due = True
            return True
        if journal.phase == "confirming" and self._running == version:
            reached("update:confirm", self._state_dir)
            if ready_to_confirm(connected, statuses, journal.serving_before):
                self.layout.confirm(version)
                self._set("confirmed")
                self.layout.prune()
        return False

    def stopping(self, service: ServiceNotifications) -> None:
        """Tell systemd why the loop ended: shutdown (STOPPING=1), or a restart into another
        release (RELOADING=1; the new program's READY=1 ends it, under the same main PID)."""
        journal = self._journal
        if self._restart_due and journal is not None:
            version = journal.order.version
            service.notifier.notify("RELOADING=1", f"STATUS=restarting into agent {version}")
        else:
            service.stopping("stopping: finishing requests, publishing offline status")

    def restart_if_due(self) -> None:
        """After the daemon stopped for a switch: become the launcher (never returns then)."""
        if self._restart_due and self._launcher is not None:
            exec_launcher(self._launcher, self._args)
