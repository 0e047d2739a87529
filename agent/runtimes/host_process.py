"""One running TensorRT host process, from the agent's side: spawn, requests, death.

:class:`HostProcess` starts ``<interpreter> -m agent.trt_host`` with one end of a socketpair,
reads its ``hello``, then matches replies to requests by id on a reader thread. When the socket
closes or the stream cannot be read (the host exited, was killed, or spoke garbage), the reader
records why (:func:`describe_exit`: ``killed by signal 9 (SIGKILL)``), unlinks every /dev/shm
region of the host's prefix, and only then fails the requests in flight with
:class:`HostDied`, so a caller that sees the failure finds no region left behind.
:mod:`agent.runtimes.host` restarts hosts and maps these failures to the agent's errors.

Concurrency: :meth:`HostProcess.request` may be called from any thread (ids and the pending
table under ``_lock``); replies and progress are delivered by the reader thread, which also
runs the ``on_death`` callback once. Output regions are attached and read under the calling
model's own lock.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.trt_host import protocol as p
from agent.trt_host import shm

log = logging.getLogger(__name__)

STDERR_LINES = 20


class HostDied(Exception):
    """The host is gone; the message says how (exit status or signal) and why when known."""


def describe_exit(returncode: int | None) -> str:
    """How a process ended, as an operator reads it."""
    if returncode is None:
        return "is still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"was killed by signal {-returncode} ({name})"
    return f"exited with status {returncode}"


@dataclass
class _Pending:
    kind: str
    on_progress: Callable[[str], None] | None
    done: threading.Event = field(default_factory=threading.Event)
    reply: p.Message | None = None


class HostProcess:
    """A started host. ``prefix`` names its /dev/shm regions; ``hello`` is its first frame."""

    def __init__(
        self,
        command: list[str],
        prefix: str,
        env: Mapping[str, str],
        cwd: str,
        on_death: Callable[[HostProcess], None],
    ) -> None:
        self.prefix = prefix
        self._on_death = on_death
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._hint: str | None = None
        self._outputs: dict[str, shm.Region] = {}
        self.death: str | None = None
        self.dead = threading.Event()
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)
        self.hello: dict[str, Any] = {}
        self.started_at = time.monotonic()
        ours, theirs = socket.socketpair()
        read_fd, write_fd = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [*command, "--fd", str(theirs.fileno()), "--shm-prefix", prefix],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                env=dict(env),
                cwd=cwd,  # ``-m`` puts the working directory first on the host's path
                start_new_session=True,  # a terminal's Ctrl-C reaches the agent, not the host
            )
        except OSError:
            ours.close()
            os.close(read_fd)
            raise
        finally:
            theirs.close()
            os.close(write_fd)
        self.pid = self.proc.pid
        self.channel = p.Channel(ours)
        self._stderr = threading.Thread(
            target=self._drain, args=(read_fd,), name=f"trt-host-{self.pid}-stderr", daemon=True
        )
        self._stderr.start()
        self._reader = threading.Thread(
            target=self._read, name=f"trt-host-{self.pid}-reader", daemon=True
        )

    def handshake(self, timeout_s: float) -> None:
        """Read the host's ``hello`` (HostDied when it exits, hangs or speaks another version)."""
        self.channel.sock.settimeout(timeout_s)
        try:
            first = self.channel.recv()
            if first.kind != p.HELLO:
                raise p.ProtocolError(f"host spoke {first.kind!r} before hello")
        except (OSError, p.ProtocolError) as exc:
            self.kill(f"no hello: {exc}" if not isinstance(exc, p.PeerClosed) else None)
            self._died()
            raise HostDied(self.death) from exc
        self.channel.sock.settimeout(None)
        self.hello = first.body
        self._reader.start()

    def request(
        self,
        kind: str,
        body: dict[str, Any],
        timeout_s: float | None,
        on_progress: Callable[[str], None] | None = None,
    ) -> p.Message:
        """Send one request and wait for its ``ok``/``error`` frame. HostDied when the host
        dies first; a host that does not answer within ``timeout_s`` is killed (and restarted
        by its owner), the request failing with that reason."""
        pending = _Pending(kind, on_progress)
        with self._lock:
            if self.death is not None:
                raise HostDied(self.death)
            ident = next(self._ids)
            self._pending[ident] = pending
        with contextlib.suppress(OSError):  # a closed socket: the reader fails the request
            self.channel.send(p.Message(kind, ident, body))
        if not pending.done.wait(timeout_s):
            self.kill(f"no answer to {kind} within {timeout_s:g} s")
            pending.done.wait()
        if pending.reply is None:
            raise HostDied(self.death or "the TensorRT host is gone")
        return pending.reply

    @property
    def in_flight(self) -> int:
        """Requests sent and not answered yet."""
        with self._lock:
            return len(self._pending)

    def attach_output(self, model: int, name: str, size: int) -> shm.Region:
        """The host's output region ``name`` for ``model``, mapped once and reused."""
        if not name.startswith(f"{self.prefix}out-{model}-"):
            raise shm.RegionError(f"output region {name!r} is not this host's")
        region = self._outputs.get(name)
        if region is None or region.size != size:
            for old in [n for n in self._outputs if n.startswith(f"{self.prefix}out-{model}-")]:
                self._outputs.pop(old).close()
            region = shm.Region.attach(name, size)
            self._outputs[name] = region
        return region

    def kill(self, hint: str | None) -> None:
        """SIGKILL the host; ``hint`` (why) is added to the death reason."""
        if hint and self._hint is None:
            self._hint = hint
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    def shutdown(self, timeout_s: float) -> None:
        """Ask the host to exit, then kill it if it has not within ``timeout_s``."""
        with contextlib.suppress(HostDied):
            self.request(p.SHUTDOWN, {}, timeout_s)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill("did not exit after shutdown")
        self.dead.wait(timeout_s)

    def _drain(self, fd: int) -> None:
        with open(fd, "rb", buffering=0) as stream:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    self.stderr_tail.append(line)
                    log.info("trt host %d: %s", self.pid, line)

    def _read(self) -> None:
        try:
            while True:
                message = self.channel.recv()
                if message.kind == p.PROGRESS:
                    self._progress(message)
                    continue
                with self._lock:
                    pending = self._pending.pop(message.id, None)
                if pending is not None:
                    pending.reply = message
                    pending.done.set()
        except (p.PeerClosed, p.Truncated, ConnectionError):
            pass  # the host closed or died: its exit status says how
        except BaseException as exc:  # noqa: BLE001 - any failure here ends this host
            self.kill(f"{type(exc).__name__}: {exc}")
        finally:
            self._died()

    def _progress(self, message: p.Message) -> None:
        with self._lock:
            pending = self._pending.get(message.id)
        if pending is not None and pending.on_progress is not None:
            try:
                pending.on_progress(str(message.body.get("line", "")))
            except Exception:
                log.exception("progress callback of a %s request failed", pending.kind)

    def _died(self) -> None:
        """Record why the host ended, fail what waited on it and tell the owner (which restarts
        it), whatever cleaning up its regions meets: a file of its prefix that another user
        made cannot be removed, and that must not leave requests waiting for good (a security probe
        did that: the reader thread died of PermissionError here and inference hung)."""
        if self.dead.is_set():
            return
        try:
            reason = self._reap()
        except BaseException as exc:  # the host is gone whatever failed here
            log.exception("cleaning up after TensorRT host %d failed", self.pid)
            reason = f"TensorRT host (pid {self.pid}) ended ({type(exc).__name__}: {exc})"
        with self._lock:
            self.death = reason
            pending, self._pending = list(self._pending.values()), {}
        for waiting in pending:
            waiting.done.set()
        self.dead.set()
        self._on_death(self)

    def _reap(self) -> str:
        """Wait for the host's exit, unmap and unlink its regions; why it ended, in words."""
        try:
            returncode = self.proc.wait(10.0)
        except subprocess.TimeoutExpired:  # the socket closed but the process lingers
            self.kill("closed its socket")
            returncode = self.proc.wait()
        self._stderr.join(5.0)
        reason = f"TensorRT host (pid {self.pid}) {describe_exit(returncode)}"
        if self._hint:
            reason += f" ({self._hint})"
        elif returncode and returncode > 0 and self.stderr_tail:
            reason += f": {self.stderr_tail[-1]}"
        self.channel.close()
        for region in self._outputs.values():
            region.close()
        removed = shm.unlink_prefix(self.prefix)
        if removed:
            log.info("unlinked %d /dev/shm regions of %s", len(removed), self.prefix)
        return reason
