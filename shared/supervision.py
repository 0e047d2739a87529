"""Supervised background threads: one rule for every long-lived thread of both programs.

A background thread that dies of an unexpected exception used to end silently: the ingest writer
stopped and its queue filled until the MQTT link blocked, the jobs loop stopped taking jobs, and
heartbeats went on as if nothing happened. :class:`Supervised` runs a thread's body under a guard
(the model is kopf's ``guard()`` in ``kopf/_cogs/aiokits/aiotasks.py``) and applies one of two
policies when the body raises:

- ``restart``: log the exception with the thread's name, wait (1 s, doubling to 60 s; reset
  after a run longer than the longest wait), and run the body again. For loops whose state lives
  elsewhere (queues, the database, the disk spool): ingest writers, the spool forwarder,
  telemetry, jobs, rollouts, re-signing.
- ``exit``: log the exception and end the process with :data:`EXIT_THREAD_DIED`, so systemd
  (``Restart=on-failure``) starts it again. For threads the process is useless without (the
  HTTP server). The exit is ``os._exit``: both programs are built to survive ``kill -9``.

A body that *returns* has stopped on purpose (its stop event was set): no restart, no log above
debug. Pure stdlib (``threading``, ``logging``), so it lives in ``shared`` beside
:mod:`shared.logfmt`; it opens no socket, file or database.

Concurrency: :attr:`Supervised.restarts` and :attr:`Supervised.last_error` are written by the
guarded thread only and read by others for health reports (single attribute reads; no lock).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Literal

Policy = Literal["restart", "exit"]

EXIT_THREAD_DIED = 70
"""Exit status when an ``exit``-policy thread dies (``EX_SOFTWARE`` from sysexits.h)."""

_log = logging.getLogger("shared.supervision")


def _exit_process(name: str, exc: BaseException) -> None:
    """Default fatal action: flush the logs and end the process at once (systemd restarts it)."""
    del exc
    _log.critical("background thread %s died; exiting so the service manager restarts us", name)
    logging.shutdown()
    os._exit(EXIT_THREAD_DIED)


class Supervised:
    """One guarded background thread: ``Supervised("ingest", body, policy="restart").start()``.

    ``stop`` (optional) is the body's own stop event: a restart waits on it, so a thread that
    crashes while the process is stopping is not run again. ``on_fatal`` replaces the process
    exit of the ``exit`` policy (tests observe it instead of dying).
    """

    def __init__(
        self,
        name: str,
        body: Callable[[], None],
        *,
        policy: Policy,
        stop: threading.Event | None = None,
        first_backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        logger: logging.Logger | None = None,
        on_fatal: Callable[[str, BaseException], None] | None = None,
        daemon: bool = True,
    ) -> None:
        self.name = name
        self._body = body
        self._policy: Policy = policy
        self._stop = stop if stop is not None else threading.Event()
        self._first_backoff_s = first_backoff_s
        self._max_backoff_s = max_backoff_s
        self._log = logger or _log
        self._on_fatal = on_fatal or _exit_process
        self.restarts = 0
        self.last_error: str | None = None
        self.thread = threading.Thread(target=self._guard, name=name, daemon=daemon)

    def start(self) -> Supervised:
        self.thread.start()
        return self

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)

    def _guard(self) -> None:
        backoff = self._first_backoff_s
        while True:
            started = time.monotonic()
            try:
                self._body()
            except BaseException as exc:  # noqa: BLE001 - the guard's whole purpose
                self.last_error = f"{type(exc).__name__}: {exc}"
                if self._policy == "exit":
                    self._log.exception("background thread %s crashed", self.name)
                    self._on_fatal(self.name, exc)
                    return
                if time.monotonic() - started > self._max_backoff_s:
                    backoff = self._first_backoff_s
                self._log.exception(
                    "background thread %s crashed; restarting in %.0f s", self.name, backoff
                )
                if self._stop.wait(backoff):
                    return
                self.restarts += 1
                backoff = min(backoff * 2, self._max_backoff_s)
                continue
            self._log.debug("background thread %s stopped", self.name)
            return


class Periodic:
    """``tick()`` every ``interval_s`` on a :class:`Supervised` thread (``restart``) until stopped.

    ``tick`` handles the errors it expects (logs them and returns); anything else reaches the
    guard, which logs it and runs the loop again after its backoff. ``stop()`` waits up to
    ``join_s`` for a tick in progress.
    """

    def __init__(
        self,
        name: str,
        tick: Callable[[], None],
        interval_s: float,
        *,
        join_s: float = 15.0,
        first_backoff_s: float = 1.0,
    ) -> None:
        self._tick = tick
        self._interval_s = interval_s
        self._join_s = join_s
        self._stop = threading.Event()
        self._guard = Supervised(
            name, self._run, policy="restart", stop=self._stop, first_backoff_s=first_backoff_s
        )

    @property
    def restarts(self) -> int:
        """How many times the thread was started again after a crash."""
        return self._guard.restarts

    def start(self) -> None:
        self._guard.start()

    def stop(self) -> None:
        self._stop.set()
        if self._guard.is_alive():
            self._guard.join(self._join_s)

    def is_alive(self) -> bool:
        return self._guard.is_alive()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._tick()


class PeriodicService:
    """A service whose :meth:`_tick` runs on a :class:`Periodic` thread: start, stop, restarts.

    A subclass sets its own state, then calls ``super().__init__(name, interval_s)``.
    """

    def __init__(self, name: str, interval_s: float) -> None:
        self._loop = Periodic(name, self._tick, interval_s)

    @property
    def restarts(self) -> int:
        """How many times the thread was started again after a crash."""
        return self._loop.restarts

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def _tick(self) -> None:
        raise NotImplementedError
