"""Run one of the controller's own modules in a child process, bounded in time and killable.

Work on an untrusted model (the static analysis, running it for reference outputs) can take as
long as the model's author wants. In a child process it does not hold the server's GIL, it is
killed at a wall-clock bound, it limits its own CPU time (:func:`limit_cpu`, so it dies even if
the controller was killed -9), and :meth:`Children.stop` kills whatever runs when the controller
shuts down. Used by :mod:`controller.analysis.runner` and
:mod:`controller.analysis.reference_runner`.

The bound is on the work, not on starting Python: a child calls :func:`ready` once its imports
are done (ONNX Runtime and NumPy take seconds on a loaded 2-core host), and the clock starts
then. Starting has a bound of its own, :data:`START_BOUND_S`.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import controller

CPU_SLACK_S = 5
"""Seconds of CPU a child may use beyond its wall-clock bound before the kernel stops it."""
START_BOUND_S = 120.0
"""Seconds a child may take to start (interpreter, imports) before it calls :func:`ready`."""
READY = b"ready\n"


@dataclass(frozen=True)
class ChildResult:
    """How a child ended: its exit status (negative: the signal that ended it) and the last
    line it printed to stderr, or killed at its bound (``timed_out``) or by
    :meth:`Children.stop` (``stopped``)."""

    code: int | None
    last_line: str = ""
    timed_out: bool = False
    stopped: bool = False

    @property
    def ok(self) -> bool:
        return self.code == 0

    def reason(self, what: str) -> str:
        """Why child ``what`` (e.g. "the analysis process") failed, in one line."""
        code = self.code
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"{what} was killed by {name}" + (
                f" ({self.last_line})" if self.last_line else ""
            )
        return self.last_line or f"{what} exited with status {code}"


class Children:
    """The child processes of one owner; :meth:`stop` kills them and refuses new ones."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[subprocess.Popen[bytes]] = set()
        self._stopping = False

    @property
    def stopping(self) -> bool:
        return self._stopping

    def run(
        self, module: str, args: list[str], timeout_s: float, start_s: float = START_BOUND_S
    ) -> ChildResult:
        """``python -m module *args CPU_SECONDS``, killed ``timeout_s`` after it called
        :func:`ready` (or after ``start_s`` if it never does and does not end)."""
        cpu_seconds = int(timeout_s) + CPU_SLACK_S
        argv = [sys.executable, "-m", module, *args, str(cpu_seconds)]
        with tempfile.TemporaryFile() as stderr:
            with self._lock:
                if self._stopping:
                    return ChildResult(None, "the controller is stopping", stopped=True)
                try:
                    child = subprocess.Popen(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=stderr,
                        env=_child_env(),
                        start_new_session=True,
                    )
                except OSError as exc:
                    return ChildResult(None, f"cannot start a child process ({exc})")
                self._live.add(child)
            try:
                if not _started(child, start_s):
                    _kill(child)
                    return ChildResult(
                        None, f"the child process did not start within {start_s:g} s"
                    )
                code = child.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill(child)
                return ChildResult(None, f"still running after {timeout_s:g} s", timed_out=True)
            finally:
                with self._lock:
                    self._live.discard(child)
                if child.stdout is not None:
                    child.stdout.close()
            if self._stopping and code != 0:
                return ChildResult(code, "the controller is stopping", stopped=True)
            stderr.seek(0)
            printed = stderr.read().decode("utf-8", "replace").splitlines()
            return ChildResult(code, next((x for x in reversed(printed) if x.strip()), ""))

    def stop(self) -> None:
        """Kill every running child; later :meth:`run` calls return ``stopped`` at once."""
        with self._lock:
            self._stopping = True
            live = list(self._live)
        for child in live:
            _kill(child)


def limit_cpu(seconds: int) -> None:
    """In the child: SIGXCPU (which ends the process) after ``seconds`` of CPU, SIGKILL one
    second later."""
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = seconds if hard == resource.RLIM_INFINITY else min(seconds, hard)
    ceiling = soft + 1 if hard == resource.RLIM_INFINITY else hard
    resource.setrlimit(resource.RLIMIT_CPU, (soft, ceiling))


def ready() -> None:
    """In the child, once its imports are done: the parent's clock starts now. Standard output
    goes to /dev/null from here on (the parent reads only this line)."""
    os.write(1, READY)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def _started(child: subprocess.Popen[bytes], start_s: float) -> bool:
    """Whether ``child`` called :func:`ready`, or closed its standard output (ended), within
    ``start_s`` seconds; what it printed before (a library's banner) is skipped."""
    assert child.stdout is not None
    fd = child.stdout.fileno()
    deadline = time.monotonic() + start_s
    seen = b""
    while READY not in seen:
        readable, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not readable:
            return False
        chunk = os.read(fd, 4096)
        if not chunk:
            return True  # ended (or never calls ready()): waited for with the work's bound
        seen = seen[-len(READY) :] + chunk
    return True


def first_line(exc: BaseException) -> str:
    """What a child prints on its last stderr line when it fails."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else repr(exc)


def _kill(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.kill()
    child.wait()


def _child_env() -> dict[str, str]:
    """This environment, with the directory this ``controller`` package was imported from first
    on ``PYTHONPATH``: the child runs the same code as the server."""
    root = str(Path(controller.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env
