"""A model served by a TensorRT host process, as the agent's ``LoadedModel``.

:class:`HostModel` is what :meth:`agent.runtimes.host.TrtHost.load` returns. Its inputs go to
the host through a /dev/shm region of its own (created at the first request, replaced by a larger
one only when a request does not fit); outputs are read from the host's region and copied out
before ``infer`` returns, because the next request reuses that region. ``state`` is ``serving``,
``restarting`` (its host died; answers InferenceError at once until reloaded), ``failed`` (the
reload after a restart failed; ``reason`` says why) or ``closed``.

A model knows its host only as a :class:`ModelHost`: what it asks of it (the request timeout,
:meth:`~ModelHost.settle` and :meth:`~ModelHost.forget`, public on ``TrtHost``), so this module
does not import :mod:`agent.runtimes.host`, which imports it.

Concurrency: the model's lock serialises its requests (one request per region at a time) and
guards its process/handle, which the host's monitor thread swaps on reload (:meth:`rebind`);
``state``/``reason`` change under the host's condition (:meth:`ModelHost.settle`), which
``wait_settled`` waits on.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from agent.errors import InferenceError, InvalidInputError
from agent.runtimes.base import TensorSpec
from agent.runtimes.host_process import HostDied, HostProcess
from agent.trt_host import protocol as p
from agent.trt_host import shm

SERVING, RESTARTING, FAILED, CLOSED = "serving", "restarting", "failed", "closed"


def failure(reply: p.Message, error: type[Exception]) -> Exception:
    """The agent's error for a host's ``error`` frame (a bad request is the caller's fault)."""
    message = str(reply.body.get("message", "the TensorRT host refused the request"))
    if reply.body.get("error") == p.BAD_REQUEST:
        return InvalidInputError(message)
    return error(message)


class ModelHost(Protocol):
    """What a :class:`HostModel` asks of the host it was loaded into (``TrtHost``)."""

    @property
    def infer_timeout_s(self) -> float:
        """How long one request to the host may take."""
        ...

    def settle(self, model: HostModel[Any], state: str, reason: str | None) -> None:
        """Set ``model``'s state and reason under the host's condition, and wake its waiters."""
        ...

    def forget(self, model: HostModel[Any]) -> None:
        """Drop a closed ``model`` from the host's table (it is not reloaded after a crash)."""
        ...


H = TypeVar("H", bound=ModelHost)


class HostModel(Generic[H]):
    """A model loaded in a host ``H`` (a ``TrtHost``); a ``LoadedModel``. ``state``: serving,
    restarting, failed or closed; ``reason`` says why when not serving."""

    def __init__(
        self,
        host: H,
        path: Path,
        options: dict[str, Any],
        proc: HostProcess,
        body: dict[str, Any],
    ) -> None:
        self.host = host
        self.path = path
        self.options = options
        self.state = SERVING
        self.reason: str | None = None
        self._lock = threading.Lock()
        self._proc = proc
        self._handle = int(body["model"])
        self._inputs = tuple(_specs(body["inputs"]))
        self._outputs = tuple(_specs(body["outputs"]))
        self.info: dict[str, Any] = dict(body.get("info") or {})
        self._region: shm.Region | None = None
        self._regions = 0

    @property
    def inputs(self) -> Sequence[TensorSpec]:
        return self._inputs

    @property
    def outputs(self) -> Sequence[TensorSpec]:
        return self._outputs

    def settle(self, state: str, reason: str | None) -> None:
        self.host.settle(self, state, reason)

    def rebind(self, proc: HostProcess, body: dict[str, Any]) -> None:
        """Serve from ``proc`` (a restarted host) with the reloaded model's handle."""
        if (
            tuple(_specs(body["inputs"])) != self._inputs
            or tuple(_specs(body["outputs"])) != self._outputs
        ):
            self.settle(FAILED, f"{self.path.name} has other inputs or outputs after the reload")
            return
        with self._lock:
            self._drop_region()
            self._proc, self._handle = proc, int(body["model"])
            self.info = dict(body.get("info") or {})
        self.settle(SERVING, None)

    def call(self, kind: str, body: dict[str, Any], timeout_s: float | None) -> dict[str, Any]:
        """Another request on this model (refit, profile); the host's failure as InferenceError
        (or InvalidInputError for a bad request)."""
        with self._lock:
            if self.state != SERVING:
                raise InferenceError(f"{self.path.name} is {self.state}: {self.reason}")
            try:
                reply = self._proc.request(kind, {**body, "model": self._handle}, timeout_s)
            except HostDied as exc:
                raise InferenceError(f"{self.path.name}: {exc}") from exc
        if reply.kind != p.OK:
            raise failure(reply, InferenceError)
        return dict(reply.body)

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        arrays = {name: np.asarray(value) for name, value in feeds.items()}
        try:
            descriptors, need = shm.place(arrays)
        except shm.RegionError as exc:
            raise InvalidInputError(str(exc)) from exc
        with self._lock:
            if self.state != SERVING:
                raise InferenceError(f"{self.path.name} is {self.state}: {self.reason}")
            proc = self._proc
            try:
                region = self._input_region(proc, need)
                shm.write(region, arrays, descriptors)
                body = {"model": self._handle, "region": region.name, "size": region.size}
                body["inputs"] = descriptors
                reply = proc.request(p.INFER, body, self.host.infer_timeout_s)
                if reply.kind != p.OK:
                    raise failure(reply, InferenceError)
                out = proc.attach_output(self._handle, reply.body["region"], reply.body["size"])
                views = shm.read(out, reply.body["outputs"])
                return {name: np.array(view) for name, view in views.items()}
            except HostDied as exc:
                raise InferenceError(f"{self.path.name}: {exc}") from exc
            except (shm.RegionError, OSError) as exc:
                raise InferenceError(f"{self.path.name}: shared memory: {exc}") from exc

    def _input_region(self, proc: HostProcess, need: int) -> shm.Region:
        region = self._region
        if region is not None and region.size >= need:
            return region
        self._drop_region()
        self._regions += 1
        name = f"{proc.prefix}in-{self._handle}-{self._regions}"
        self._region = shm.Region.create(name, shm.rounded_size(need))
        return self._region

    def _drop_region(self) -> None:
        if self._region is not None:
            self._region.close()
            self._region.unlink()
            self._region = None

    def close(self) -> None:
        with self._lock:
            proc, handle = self._proc, self._handle
            self._drop_region()
            was = self.state
            self.state, self.reason = CLOSED, "closed"
        self.host.forget(self)
        if was == SERVING and proc.death is None:
            with contextlib.suppress(HostDied):  # gone with its host
                proc.request(p.UNLOAD, {"model": handle}, self.host.infer_timeout_s)


def _specs(raw: list[dict[str, Any]]) -> list[TensorSpec]:
    return [
        TensorSpec(str(s["name"]), str(s["datatype"]), tuple(int(d) for d in s["shape"]))
        for s in raw
    ]
