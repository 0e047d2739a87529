"""``swap_mode = worker_process``: each model's engine lives in a child process of its own.

The parent keeps a :class:`WorkerModel` (a LoadedModel) that forwards requests over a
``multiprocessing`` pipe to a child started with the *spawn* method (a fresh interpreter: no
inherited CUDA context, no copied heap). The child loads the engine with the same loader as in
process mode, answers ``infer`` calls, and exits on ``close``. A swap starts a *new* worker for
the new version; when the old worker exits, the OS takes back everything it held — CUDA context,
NvMap blocks, glibc arenas that ``free`` never returned — so memory cannot creep across swaps.

Memory cost of each mode (docs/tensorrt.md#memory-on-a-jetson):

TensorRT never runs in the agent: its "worker" is a TensorRT host of its own per model
(:mod:`agent.runtimes.trt_hosts`), and ``in_process`` means one TensorRT host shared by every
TensorRT model of the agent.

* ``in_process`` (default): one interpreter, one CUDA context, one TensorRT runtime and one
  activation arena shared by every model; a warm swap costs only the new engine's weights and
  I/O buffers. Cheapest, but what a runtime leaks on unload stays in the agent until it restarts.
* ``worker_process``: every model pays a whole process: the Python interpreter and numpy
  (~30-40 MiB RSS), ONNX Runtime (~20-50 MiB) or, with TensorRT, the CUDA context and the
  TensorRT/cuDNN/cuBLAS libraries (~0.8-1.1 GB of host RAM per process on a Jetson, shared DRAM),
  and a warm swap briefly runs two workers of that model. On an 8 GB Orin Nano that means one
  TensorRT model per worker at most, swapped cold. In exchange, models do not contend inside one
  CUDA context and a swap returns all of the old version's memory.

Requests to one worker are serialised over its pipe (one request at a time per model); the
worker's runtime uses its own threads for the inference itself.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from agent.errors import InferenceError, ModelLoadError
from agent.hardware.runtime_kinds import TENSORRT, runtime_kind
from agent.runtimes.base import TensorSpec

START_TIMEOUT_S = 120.0


def _worker_main(conn: Connection, runtime: str, path: str, threads: int) -> None:
    """The child: load, report the I/O specs, then answer requests until told to stop."""
    try:
        from agent.runtimes.loading import load_engine

        model: Any = load_engine(runtime, Path(path), intra_op_threads=threads)
    except Exception as exc:  # noqa: BLE001 - the child's last word goes to the parent verbatim
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", tuple(model.inputs), tuple(model.outputs)))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            break
        if message[0] == "stop":
            break
        try:
            conn.send(("ok", model.infer(message[1])))
        except Exception as exc:  # noqa: BLE001 - reported to the parent as an InferenceError
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
    model.close()
    conn.close()


class WorkerModel:
    """A model served by a child process; implements :class:`agent.runtimes.base.LoadedModel`."""

    def __init__(self, runtime: str, path: Path, intra_op_threads: int = 1) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(
            target=_worker_main,
            args=(child, runtime, str(path), intra_op_threads),
            name=f"jetfleet-worker-{path.stem[:12]}",
            daemon=True,
        )
        self._process.start()
        child.close()
        self._lock = threading.Lock()
        if not self._conn.poll(START_TIMEOUT_S):
            self._kill()
            raise ModelLoadError(f"model worker for {path.name} did not start in time")
        try:
            reply = self._conn.recv()
        except EOFError as exc:
            self._kill()
            raise ModelLoadError(f"model worker for {path.name} died while loading") from exc
        if reply[0] != "ready":
            self._kill()
            raise ModelLoadError(f"model worker could not load {path.name}: {reply[1]}")
        self._inputs: tuple[TensorSpec, ...] = reply[1]
        self._outputs: tuple[TensorSpec, ...] = reply[2]

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def inputs(self) -> Sequence[TensorSpec]:
        return self._inputs

    @property
    def outputs(self) -> Sequence[TensorSpec]:
        return self._outputs

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        with self._lock:
            if not self._process.is_alive():
                raise InferenceError("model worker is not running")
            try:
                self._conn.send(("infer", dict(feeds)))
                reply = self._conn.recv()
            except (EOFError, OSError) as exc:
                raise InferenceError(f"model worker failed: {exc}") from exc
        if reply[0] != "ok":
            raise InferenceError(f"model worker: {reply[1]}")
        result: dict[str, np.ndarray] = reply[1]
        return result

    def close(self) -> None:
        """Ask the worker to exit; kill it if it does not within 10 s."""
        with self._lock:
            if self._process.is_alive():
                with contextlib.suppress(OSError):
                    self._conn.send(("stop",))
                self._process.join(10)
            self._kill()
            self._conn.close()

    def _kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()
        self._process.join(5)


def load_in_worker(runtime: str) -> Any:
    """A ModelLoader that starts one worker per load, for ``runtime``.

    TensorRT's worker is a TensorRT host of its own (:func:`agent.runtimes.trt_hosts.
    load_in_own_host`), started under the TensorRT interpreter and closed with the model.
    """
    if runtime_kind(runtime) is TENSORRT:
        from agent.runtimes.trt_hosts import load_in_own_host

        def load_host(path: Path, *, intra_op_threads: int = 1) -> Any:
            del intra_op_threads  # TensorRT schedules its own kernels
            return load_in_own_host(path)

        return load_host

    def load(path: Path, *, intra_op_threads: int = 1) -> WorkerModel:
        return WorkerModel(runtime, path, intra_op_threads)

    return load
