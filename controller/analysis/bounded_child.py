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

A child works on its author's program, so it starts with as little as it needs:

* ``python -I`` (no ``PYTHON*`` variables, no user site, not the working directory on the import
  path) in a private, empty working directory (the caller's scratch directory, 0700), so a
  relative path in a model resolves to nothing of the controller's;
* confined by Landlock before its first import (:mod:`controller.analysis.sandbox`): it reads
  code and libraries and its scratch directory, nothing else; the files it works on are opened
  here and handed over as descriptors (:class:`InputFile`), so the data directory (signing key,
  tokens, SQLite database) stays out of its reach;
* an address-space limit (``RLIMIT_AS``) where the caller sets one, so an input of a billion
  elements is a ``MemoryError`` in the child, not gigabytes taken from the server.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import resource
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import controller
from controller.analysis import sandbox

logger = logging.getLogger(__name__)

CPU_SLACK_S = 5
"""Seconds of CPU a child may use beyond its wall-clock bound before the kernel stops it."""
START_BOUND_S = 120.0
"""Seconds a child may take to start (interpreter, imports) before it calls :func:`ready`."""
READY = b"ready\n"
MEMORY_BASE_BYTES = 2 << 30
"""Address space of a child beyond what its input files account for (interpreter, NumPy, ONNX
Runtime and their threads take about 0.3 GiB of it)."""
MEMORY_PER_INPUT_BYTE = 4
"""Address space per byte of the files a child works on: the bytes read, the parsed model,
ONNX Runtime's copy of its weights, and room."""
_BOOTSTRAP = (
    "import sys\n"
    "root, workdir, memory, module = sys.argv[1:5]\n"
    "del sys.argv[1:5]\n"
    "sys.path.insert(0, root)\n"
    "from controller.analysis.bounded_child import enter_child\n"
    "enter_child(root, workdir, int(memory), module)\n"
)
"""``python -I -c _BOOTSTRAP ROOT WORKDIR MEMORY MODULE ARGS...``: the same code as the server
(``ROOT`` first on the import path), limited and confined before ``MODULE`` is imported."""
_warned_unconfined = False


@dataclass(frozen=True)
class InputFile:
    """A file the child reads: opened read-only here, the child gets ``fd:N`` in its place
    (read it with :func:`read_input`), so it needs no right to the file's directory."""

    path: Path


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
        self,
        module: str,
        args: Sequence[str | InputFile],
        timeout_s: float,
        start_s: float = START_BOUND_S,
        workdir: Path | None = None,
        memory_bytes: int | None = None,
    ) -> ChildResult:
        """``python -m module *args CPU_SECONDS``, killed ``timeout_s`` after it called
        :func:`ready` (or after ``start_s`` if it never does and does not end), in ``workdir``
        (the only directory it may write; a fresh empty one if None), its address space limited
        to ``memory_bytes`` (None: unlimited)."""
        if workdir is None:
            with tempfile.TemporaryDirectory(prefix="jetfleet-child-") as private:
                return self.run(module, args, timeout_s, start_s, Path(private), memory_bytes)
        _warn_if_unconfined()
        cpu_seconds = int(timeout_s) + CPU_SLACK_S
        fds: list[int] = []
        try:
            words = [_argument(a, fds) for a in args]
        except OSError as exc:
            _close(fds)
            return ChildResult(None, f"cannot open the child's input ({exc})")
        argv = [
            sys.executable,
            "-I",
            "-c",
            _BOOTSTRAP,
            _code_root(),
            str(workdir),
            str(memory_bytes or 0),
            module,
            *words,
            str(cpu_seconds),
        ]
        try:
            return self._run(argv, workdir, fds, timeout_s, start_s)
        finally:
            _close(fds)

    def _run(
        self, argv: list[str], workdir: Path, fds: list[int], timeout_s: float, start_s: float
    ) -> ChildResult:
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
                        cwd=workdir,
                        pass_fds=fds,
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


def memory_bound(inputs: Sequence[Path]) -> int:
    """The address-space limit of a child that works on ``inputs``:
    :data:`MEMORY_BASE_BYTES` + :data:`MEMORY_PER_INPUT_BYTE` x their size."""
    size = sum(p.stat().st_size for p in inputs if p.exists())
    return MEMORY_BASE_BYTES + MEMORY_PER_INPUT_BYTE * size


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


def _code_root() -> str:
    """The directory this ``controller`` package was imported from: the child runs the same
    code as the server."""
    return str(Path(controller.__file__).resolve().parent.parent)


def _argument(arg: str | InputFile, fds: list[int]) -> str:
    if isinstance(arg, str):
        return arg
    fd = os.open(arg.path, os.O_RDONLY | os.O_CLOEXEC)
    fds.append(fd)
    return f"fd:{fd}"


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _warn_if_unconfined() -> None:
    global _warned_unconfined
    if not _warned_unconfined and sandbox.abi_version() < 1:
        _warned_unconfined = True
        logger.warning(
            "this kernel has no Landlock: analysis and reference processes run unconfined "
            "(they still run in an empty directory with python -I); use Linux >= 5.13 with "
            "landlock in its lsm= list to keep the data directory out of their reach"
        )


def read_input(arg: str) -> bytes:
    """In the child: the bytes of an argument that was an :class:`InputFile` (``fd:N``), or of
    the file at path ``arg``."""
    if arg.startswith("fd:"):
        with os.fdopen(int(arg[3:]), "rb") as handle:
            return handle.read()
    return Path(arg).read_bytes()


def enter_child(root: str, workdir: str, memory_bytes: int, module: str) -> None:
    """The child's first step (:data:`_BOOTSTRAP`): limit its address space, confine it to
    reading code and libraries and to its ``workdir``, then run ``module`` as ``__main__``."""
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    code_dirs = [os.path.join(root, "controller"), os.path.join(root, "shared")]
    spec = importlib.util.find_spec(module.split(".")[0])
    if spec is not None and spec.submodule_search_locations:
        code_dirs.extend(spec.submodule_search_locations)
    with contextlib.suppress(sandbox.SandboxUnavailable):  # the parent logged it once
        sandbox.confine(sandbox.read_roots(code_dirs), [workdir])
    sys.argv[0] = module
    runpy.run_module(module, run_name="__main__", alter_sys=True)
