"""The TensorRT host client: models served by a child process, as the agent's ``LoadedModel``.

:class:`TrtHost` starts ``agent.trt_host`` under a given interpreter (JetPack's Python for
TensorRT; ``sys.executable`` for the ONNX Runtime CPU backend CI runs) and loads models into
it; each is a :class:`HostModel`, a ``LoadedModel`` (:mod:`agent.runtimes.base`), so serving
and swapping use it unchanged. Inputs go to the host through a /dev/shm region per model,
outputs come back through the host's region (:mod:`agent.trt_host.shm`); outputs are copied out
of it before ``infer`` returns, because the next request reuses the region.

Crashes (decided here, docs/architecture.md#the-tensorrt-host): when the host dies (``kill -9``, a
TensorRT abort, a request it leaves unanswered past its timeout), its regions are unlinked and only
that host's requests in flight fail: ``infer`` with InferenceError, ``load`` with ModelLoadError,
``build`` with BuildFailed, each naming how it ended (``killed by signal 9 (SIGKILL)``). Until it is
back, its models answer InferenceError at once ("restarting") instead of queueing. The host restarts
with backoff (:func:`restart_delay`; reset once a host has lived longer than the longest wait), then
**reloads its models** in the order they were loaded, with the same file and options. A model whose
reload fails stays in the agent as ``failed`` with the reason (``status``) and answers
InferenceError; a model during whose reload the host died again is not tried again (a model that
crashes the host cannot crash-loop it). Other hosts (worker mode: one per model) are not touched, so
a model loading in a host that dies never disturbs the model still serving.

Admission: a host's memory is its own process's, returned to the OS when it exits
(:meth:`TrtHost.rss_bytes` reports it while it runs).

Concurrency: one lock (``_lock``) guards the current process and the model table; a model's own
lock serialises its requests (its regions are used by one request at a time). The monitor thread
(supervised, restart policy) is the only one that restarts the host and reloads models.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.engines.build_runner import BuildFailed
from agent.errors import InferenceError, ModelLoadError
from agent.runtimes.host_model import (
    CLOSED,
    FAILED,
    RESTARTING,
    SERVING,
    HostModel,
    failure,
)
from agent.runtimes.host_process import HostDied, HostProcess
from agent.trt_host import launch, shm
from agent.trt_host import protocol as p
from shared.supervision import Supervised

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostConfig:
    """How to run a host. ``isolate``: put only ``agent/trt_host`` on the host's path (default:
    when ``interpreter`` is not this one, whose site-packages another Python cannot use)."""

    interpreter: str = field(default_factory=lambda: sys.executable)
    backend: str = "onnxruntime"
    module: str = "agent.trt_host"
    isolate: bool | None = None
    first_backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    start_timeout_s: float = 60.0
    infer_timeout_s: float = 60.0
    load_timeout_s: float = 900.0
    build_timeout_s: float | None = None
    env: Mapping[str, str] = field(default_factory=dict)


def restart_delay(crashes: int, first_s: float, max_s: float) -> float:
    """The wait before restart number ``crashes`` (1, 2, ...): ``first_s`` doubling to ``max_s``."""
    return float(min(first_s * 2 ** max(crashes - 1, 0), max_s))


_package_root = launch.package_root  # shared with the TensorRT interpreter probe
_isolated_root = launch.isolated_root


class TrtHost:
    """One host process and the models loaded into it; ``start`` before use, ``close`` after."""

    _counter = 0

    def __init__(self, config: HostConfig | None = None, name: str = "trt-host") -> None:
        self.config = config or HostConfig()
        self.name = name
        TrtHost._counter += 1
        self._tag = f"{TrtHost._counter}"
        self._generation = 0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._died = threading.Event()
        self._proc: HostProcess | None = None
        self._models: list[HostModel[TrtHost]] = []
        self._crashes = 0
        self.restarts = 0
        self.last_exit: str | None = None
        isolate = self.config.isolate
        if isolate is None:
            isolate = os.path.realpath(self.config.interpreter) != os.path.realpath(sys.executable)
        self._isolated = _isolated_root() if isolate else None
        root = self._isolated or _package_root()
        self._root = str(root)
        self._env = {**os.environ, **self.config.env, "PYTHONPATH": self._root}
        self._monitor = Supervised(
            f"{name}-monitor", self._watch, policy="restart", stop=self._stop
        )

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> TrtHost:
        """Start the host (ModelLoadError when it cannot start or speaks another version)."""
        shm.sweep_orphans()
        try:
            self._spawn()
        except HostDied as exc:
            raise ModelLoadError(f"cannot start the TensorRT host: {exc}") from exc
        self._monitor.start()
        return self

    def _spawn(self) -> HostProcess:
        self._generation += 1
        tag = f"{self._tag}.{self._generation}.{secrets.token_hex(8)}"  # unguessable names
        prefix = shm.host_prefix(os.getpid(), tag)
        command = [self.config.interpreter, "-m", self.config.module]
        command += ["--backend", self.config.backend]
        proc = HostProcess(command, prefix, self._env, self._root, self._on_death)
        proc.handshake(self.config.start_timeout_s)
        with self._changed:
            self._proc = proc
            self._changed.notify_all()
        log.info("%s: started pid %d (%s)", self.name, proc.pid, proc.hello)
        return proc

    def close(self) -> None:
        """Unload everything and stop the host; its memory returns to the OS."""
        self._stop.set()
        with self._changed:
            proc, self._proc = self._proc, None
            for model in self._models:
                model.state, model.reason = CLOSED, "the TensorRT host was closed"
            self._models.clear()
            self._changed.notify_all()
        if proc is not None:
            proc.shutdown(10.0)
        self._died.set()
        if self._monitor.is_alive():
            self._monitor.join(30.0)
        if self._isolated is not None:
            shutil.rmtree(self._isolated, ignore_errors=True)

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.death is None else None

    @property
    def shm_prefix(self) -> str | None:
        proc = self._proc
        return proc.prefix if proc is not None else None

    @property
    def hello(self) -> dict[str, Any]:
        proc = self._proc
        return dict(proc.hello) if proc is not None else {}

    def in_flight(self) -> int:
        """Requests sent to the running host and not answered yet."""
        proc = self._proc
        return proc.in_flight if proc is not None else 0

    def rss_bytes(self) -> int:
        """Resident memory of the running host (0 when none runs), for admission."""
        pid = self.pid
        if pid is None:
            return 0
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return 0
        return 0

    def wait_settled(self, timeout_s: float) -> bool:
        """Wait until a host runs and no model is restarting (True) or ``timeout_s`` passes."""
        with self._changed:
            return self._changed.wait_for(
                lambda: (
                    self._proc is not None
                    and self._proc.death is None
                    and all(m.state != RESTARTING for m in self._models)
                ),
                timeout_s,
            )

    # -- requests ----------------------------------------------------------------------------

    def _current(self) -> HostProcess:
        with self._lock:
            proc = self._proc
        if proc is None or proc.death is not None:
            reason = self.last_exit or "not started"
            raise HostDied(f"the TensorRT host is restarting: {reason}")
        return proc

    def ping(self) -> dict[str, Any]:
        try:
            reply = self._current().request(p.PING, {}, self.config.infer_timeout_s)
        except HostDied as exc:
            raise InferenceError(str(exc)) from exc
        return dict(reply.body)

    def load(
        self,
        path: Path,
        options: Mapping[str, Any] | None = None,
        on_progress: Callable[[str], None] | None = None,
    ) -> HostModel[TrtHost]:
        """Load ``path`` into the host (ModelLoadError with the host's reason, or its death)."""
        opts = dict(options or {})
        try:
            proc = self._current()
            reply = proc.request(
                p.LOAD,
                {"path": str(path.absolute()), "options": opts},
                self.config.load_timeout_s,
                on_progress,
            )
        except HostDied as exc:
            raise ModelLoadError(f"cannot load {path.name}: {exc}") from exc
        if reply.kind != p.OK:
            raise ModelLoadError(f"cannot load {path.name}: {failure(reply, ModelLoadError)}")
        model = HostModel(self, path, opts, proc, reply.body)
        with self._changed:
            self._models.append(model)
            if proc.death is not None:  # died between its answer and now: reload it too
                model.state, model.reason = RESTARTING, proc.death
        return model

    def build(
        self,
        source: Path,
        target: Path,
        options: Mapping[str, Any] | None = None,
        on_progress: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Build ``target`` from ``source`` in the host, streaming progress lines."""
        lines: list[str] = []

        def progress(line: str) -> None:
            lines.append(line)
            if on_progress is not None:
                on_progress(line)

        body = {
            "source": str(source.absolute()),
            "target": str(target.absolute()),
            "options": dict(options or {}),
        }
        try:
            reply = self._current().request(p.BUILD, body, self.config.build_timeout_s, progress)
        except HostDied as exc:
            raise BuildFailed(f"build of {source.name} failed: {exc}", lines) from exc
        if reply.kind != p.OK:
            raise BuildFailed(f"build of {source.name} failed: {reply.body.get('message')}", lines)
        return dict(reply.body)

    # -- what its models ask of it (host_model.ModelHost) -------------------------------------

    @property
    def infer_timeout_s(self) -> float:
        """How long one request to the host may take (``config.infer_timeout_s``)."""
        return self.config.infer_timeout_s

    def settle(self, model: HostModel[TrtHost], state: str, reason: str | None) -> None:
        """Set ``model``'s state and reason under the host's condition; wakes ``wait_settled``."""
        with self._changed:
            model.state, model.reason = state, reason
            self._changed.notify_all()

    def forget(self, model: HostModel[TrtHost]) -> None:
        """Drop a closed ``model`` from the table (it is not reloaded after a crash)."""
        with self._changed:
            if model in self._models:
                self._models.remove(model)
            self._changed.notify_all()

    # -- crashes ---------------------------------------------------------------------------

    def _on_death(self, proc: HostProcess) -> None:
        with self._changed:
            if self._proc is not proc or self._stop.is_set():
                return
            self.last_exit = proc.death
            if time.monotonic() - proc.started_at > self.config.max_backoff_s:
                self._crashes = 0
            for model in self._models:
                if model.state == SERVING:
                    model.state, model.reason = RESTARTING, proc.death
            self._changed.notify_all()
        log.warning("%s: %s; restarting", self.name, proc.death)
        self._died.set()

    def _watch(self) -> None:
        """Monitor body: after each death, wait the backoff, restart, reload the models."""
        while not self._stop.is_set():
            self._died.wait()
            if self._stop.is_set():
                return
            self._died.clear()
            self._crashes += 1
            delay = restart_delay(
                self._crashes, self.config.first_backoff_s, self.config.max_backoff_s
            )
            if self._stop.wait(delay):
                return
            try:
                proc = self._spawn()
            except HostDied as exc:
                self.last_exit = str(exc)
                log.warning("%s: restart failed: %s", self.name, exc)
                self._died.set()
                continue
            self.restarts += 1
            self._reload(proc)

    def _reload(self, proc: HostProcess) -> None:
        with self._lock:
            todo = [m for m in self._models if m.state == RESTARTING]
        for model in todo:
            try:
                reply = proc.request(
                    p.LOAD,
                    {"path": str(model.path.absolute()), "options": model.options},
                    self.config.load_timeout_s,
                )
            except HostDied as exc:
                model.settle(FAILED, f"the TensorRT host died while reloading it: {exc}")
                return
            if reply.kind != p.OK:
                model.settle(
                    FAILED, f"reload after a host restart failed: {failure(reply, ModelLoadError)}"
                )
                continue
            model.rebind(proc, reply.body)
