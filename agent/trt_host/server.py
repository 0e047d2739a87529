"""The TensorRT host's serving loop: one agent, one socket, models behind a pluggable backend.

``python -m agent.trt_host --fd N --backend NAME --shm-prefix P`` (see ``__main__``) runs
:func:`serve` on the socket the agent passed as fd ``N``. The host speaks first (``hello``), then
answers requests in order: load, io, infer, unload, refit, profile, ping, shutdown inline; a
build runs on its own thread so pings and inferences keep being answered while it streams
progress. Inputs are read in place from the agent's region, outputs written into the host's own
region (``shm``).

When the agent's socket closes (the agent exited or was killed) the host unloads nothing, unlinks
every region of its prefix and exits: the process's exit returns all its memory to the OS.

``refit`` and ``profile`` (protocol 1.1) are optional for a backend: one without them answers
``unsupported``. A load's answer carries ``info`` (``Backend.info`` when the backend has it:
``refittable``, activation bytes), which the agent keeps beside the model.

Backends (:class:`Backend`): ``onnxruntime`` (``backend_ort``, the CPU backend CI runs) and
``tensorrt`` (``backend_trt``), imported by name only when chosen, so ONNX Runtime is never loaded
into a TensorRT host and TensorRT never into a CI host.

Runs under JetPack's Python: Python 3.8 syntax, standard library and numpy only.
Concurrency: the loop thread owns models and regions; a build thread touches neither and only
sends frames (``Channel.send`` is locked).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import sys
import threading
import traceback
from typing import Any, Callable, Protocol

import numpy as np

from . import protocol as p
from . import shm

BACKENDS = {"onnxruntime": "agent.trt_host.backend_ort", "tensorrt": "agent.trt_host.backend_trt"}
"""Backend name → the module whose ``create()`` returns it (imported only when chosen)."""

Progress = Callable[[str], None]


class Backend(Protocol):
    """What the host needs from a runtime. Handles are the backend's own objects."""

    name: str

    def version(self) -> str: ...

    def load(self, path: str, options: dict[str, Any]) -> object:
        """Load ``path``; raise with a message saying why it cannot."""
        ...

    def io(self, handle: object) -> dict[str, list[dict[str, Any]]]:
        """``{"inputs": [...], "outputs": [...]}``, each ``{name, datatype (KServe), shape}``."""
        ...

    def infer(self, handle: object, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def unload(self, handle: object) -> None: ...

    def build(
        self, source: str, target: str, options: dict[str, Any], progress: Progress
    ) -> dict[str, Any]:
        """Build ``target`` from ``source``, calling ``progress`` with one line per step."""
        ...


def load_backend(name: str) -> Backend:
    module = BACKENDS.get(name)
    if module is None:
        raise SystemExit(f"unknown backend {name!r}; known: {', '.join(sorted(BACKENDS))}")
    backend: Backend = importlib.import_module(module).create()
    return backend


class RequestFailed(Exception):
    """A request the host answers with an ``error`` frame of kind ``code``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Host:
    """The loop's state: loaded models, their output regions, the attached input regions."""

    def __init__(self, channel: p.Channel, backend: Backend, prefix: str) -> None:
        self.channel = channel
        self.backend = backend
        self.prefix = prefix
        self.models: dict[int, object] = {}
        self.next_model = 1
        self.outputs: dict[int, shm.Region] = {}
        self.inputs: dict[str, shm.Region] = {}
        self.regions_made = 0
        self.builds: list[threading.Thread] = []

    def hello(self) -> None:
        body = {
            "protocol": p.VERSION,
            "pid": os.getpid(),
            "python": platform.python_version(),
            "backend": self.backend.name,
            "backend_version": self.backend.version(),
            "path": os.path.dirname(os.path.abspath(__file__)),
        }
        self.channel.send(p.Message(p.HELLO, 0, body))

    def run(self) -> None:
        """Answer requests until ``shutdown`` or until the agent's socket closes."""
        while True:
            try:
                message = self.channel.recv()
            except p.PeerClosed:
                return
            if message.kind == p.SHUTDOWN:
                self.channel.send(p.Message(p.OK, message.id))
                return
            if message.kind == p.BUILD:
                thread = threading.Thread(target=self._build, args=(message,), daemon=True)
                self.builds.append(thread)
                thread.start()
                continue
            self.channel.send(self.answer(message))

    def answer(self, message: p.Message) -> p.Message:
        handlers = {
            p.PING: self._ping,
            p.LOAD: self._load,
            p.IO: self._io,
            p.INFER: self._infer,
            p.UNLOAD: self._unload,
            p.REFIT: self._refit,
            p.PROFILE: self._profile,
        }
        handler = handlers.get(message.kind)
        try:
            if handler is None:
                raise RequestFailed(p.UNKNOWN_KIND, f"unknown request kind {message.kind!r}")
            return p.Message(p.OK, message.id, handler(message))
        except RequestFailed as exc:
            return _error(message.id, exc.code, str(exc))
        except shm.RegionError as exc:
            return _error(message.id, p.BAD_REQUEST, str(exc))

    def _model(self, body: dict[str, Any]) -> tuple[int, object]:
        model = body.get("model")
        if not isinstance(model, int) or model not in self.models:
            raise RequestFailed(p.BAD_REQUEST, f"no model {model!r} is loaded in this host")
        return model, self.models[model]

    def _ping(self, message: p.Message) -> dict[str, Any]:
        return {"models": len(self.models), "pid": os.getpid()}

    def _load(self, message: p.Message) -> dict[str, Any]:
        path, options = message.body.get("path"), message.body.get("options", {})
        if not isinstance(path, str) or not isinstance(options, dict):
            raise RequestFailed(p.BAD_REQUEST, "load needs a string path and an options object")
        self.channel.send(p.Message(p.PROGRESS, message.id, {"line": f"loading {path}"}))
        try:
            handle = self.backend.load(path, options)
            io = self.backend.io(handle)
        except Exception as exc:
            raise RequestFailed(p.LOAD_FAILED, _describe(exc)) from exc
        info = getattr(self.backend, "info", None)
        model = self.next_model
        self.next_model += 1
        self.models[model] = handle
        body = {"model": model, "inputs": io["inputs"], "outputs": io["outputs"]}
        body["info"] = dict(info(handle)) if info is not None else {}
        return body

    def _optional(self, name: str) -> Callable[..., dict[str, Any]]:
        method = getattr(self.backend, name, None)
        if method is None:
            raise RequestFailed(
                p.UNSUPPORTED, f"the {self.backend.name} backend of this host cannot {name}"
            )
        return method  # type: ignore[no-any-return]

    def _refit(self, message: p.Message) -> dict[str, Any]:
        _, handle = self._model(message.body)
        onnx = message.body.get("onnx")
        if not isinstance(onnx, str):
            raise RequestFailed(p.BAD_REQUEST, "refit needs the new ONNX file's path")
        refit = self._optional("refit")
        try:
            return dict(refit(handle, onnx))
        except Exception as exc:
            raise RequestFailed(p.REFIT_FAILED, _describe(exc)) from exc

    def _profile(self, message: p.Message) -> dict[str, Any]:
        _, handle = self._model(message.body)
        feeds, runs = message.body.get("feeds"), message.body.get("runs", 10)
        warmups = message.body.get("warmups", 2)
        if not isinstance(feeds, str) or not isinstance(runs, int) or not isinstance(warmups, int):
            raise RequestFailed(p.BAD_REQUEST, "profile needs a feeds file (.npz) and run counts")
        profile = self._optional("profile")
        try:
            with np.load(feeds, allow_pickle=False) as stored:
                arrays = {name: stored[name] for name in stored.files}
            return dict(profile(handle, arrays, runs, warmups))
        except Exception as exc:
            raise RequestFailed(p.PROFILE_FAILED, _describe(exc)) from exc

    def _io(self, message: p.Message) -> dict[str, Any]:
        _, handle = self._model(message.body)
        return dict(self.backend.io(handle))

    def _infer(self, message: p.Message) -> dict[str, Any]:
        model, handle = self._model(message.body)
        region = self._input_region(message.body)
        descriptors = message.body.get("inputs")
        if not isinstance(descriptors, list):
            raise RequestFailed(p.BAD_REQUEST, "infer needs a list of input descriptors")
        arrays = shm.read(region, descriptors)
        try:
            results = self.backend.infer(handle, arrays)
        except Exception as exc:
            raise RequestFailed(p.INFER_FAILED, _describe(exc)) from exc
        finally:
            del arrays
        outputs = {name: np.asarray(value) for name, value in results.items()}
        placed, need = shm.place(outputs)
        out = self.outputs.get(model)
        if out is None or out.size < need:
            if out is not None:
                out.close()
                out.unlink()
            self.regions_made += 1
            name = f"{self.prefix}out-{model}-{self.regions_made}"
            out = shm.Region.create(name, shm.rounded_size(need))
            self.outputs[model] = out
        shm.write(out, outputs, placed)
        return {"region": out.name, "size": out.size, "outputs": placed}

    def _input_region(self, body: dict[str, Any]) -> shm.Region:
        name, size = body.get("region"), body.get("size")
        if not isinstance(name, str) or not name.startswith(self.prefix):
            raise RequestFailed(p.BAD_REQUEST, f"input region {name!r} is not this host's")
        if not isinstance(size, int) or size <= 0:
            raise RequestFailed(p.BAD_REQUEST, f"bad region size {size!r}")
        region = self.inputs.get(name)
        if region is None or region.size != size:
            lane = name.rsplit("-", 1)[0]  # the agent replaced this lane's region: drop the old
            for old in [n for n in self.inputs if n.rsplit("-", 1)[0] == lane]:
                self.inputs.pop(old).close()
            region = shm.Region.attach(name, size)
            self.inputs[name] = region
        return region

    def _unload(self, message: p.Message) -> dict[str, Any]:
        model, handle = self._model(message.body)
        del self.models[model]
        self.backend.unload(handle)
        out = self.outputs.pop(model, None)
        if out is not None:
            out.close()
            out.unlink()
        for name in [n for n in self.inputs if n.startswith(f"{self.prefix}in-{model}-")]:
            self.inputs.pop(name).close()
        return {}

    def _build(self, message: p.Message) -> None:
        source, target = message.body.get("source"), message.body.get("target")
        options = message.body.get("options", {})

        def progress(line: str) -> None:
            self.channel.send(p.Message(p.PROGRESS, message.id, {"line": line}))

        try:
            if not isinstance(source, str) or not isinstance(target, str):
                raise RequestFailed(p.BAD_REQUEST, "build needs a source and a target path")
            try:
                info = self.backend.build(source, target, dict(options), progress)
            except RequestFailed:
                raise
            except Exception as exc:
                raise RequestFailed(p.BUILD_FAILED, _describe(exc)) from exc
            reply = p.Message(p.OK, message.id, info)
        except RequestFailed as exc:
            reply = _error(message.id, exc.code, str(exc))
        with contextlib.suppress(OSError):  # the agent is gone: the loop sees it and cleans up
            self.channel.send(reply)

    def close(self) -> None:
        for handle in list(self.models.values()):
            with contextlib.suppress(Exception):  # exiting anyway; the OS takes the rest
                self.backend.unload(handle)
        self.models.clear()
        for region in list(self.outputs.values()) + list(self.inputs.values()):
            region.close()
        shm.unlink_prefix(self.prefix)


def _error(ident: int, code: str, message: str) -> p.Message:
    return p.Message(p.ERROR, ident, {"error": code, "message": message})


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def serve(sock_fd: int, backend_name: str, prefix: str) -> int:
    """Serve the agent on ``sock_fd``; the exit status (0 on shutdown or agent gone, 2 on a
    protocol error, whose reason goes to stderr)."""
    import socket

    sock = socket.socket(fileno=sock_fd)
    channel = p.Channel(sock)
    if not prefix.startswith(shm.ROOT):
        print(f"trt host: bad --shm-prefix {prefix!r}", file=sys.stderr)
        return 2
    host = Host(channel, load_backend(backend_name), prefix)
    status = 0
    try:
        host.hello()
        host.run()
    except p.ProtocolError as exc:
        print(f"trt host: {exc}", file=sys.stderr)
        status = 2
    except OSError as exc:  # the agent went away while we were answering
        print(f"trt host: agent connection lost: {exc}", file=sys.stderr)
    except Exception:  # noqa: BLE001 - the host's last word goes to the agent's log
        traceback.print_exc()
        status = 1
    finally:
        host.close()
        channel.close()
    return status
