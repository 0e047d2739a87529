"""TensorRT as the agent's runtime, in TensorRT hosts (docs/architecture.md#the-tensorrt-host).

The agent never imports TensorRT: a slot of runtime ``tensorrt`` loads its plan into a
:class:`~agent.runtimes.host.TrtHost` started with ``backend="tensorrt"`` under the TensorRT
interpreter (:func:`agent.engines.trt_interpreter.tensorrt_launch`). Which host, by swap mode:

* ``in_process``: one host shared by every TensorRT model of the agent
  (:func:`load_in_shared_host`): one CUDA context, one TensorRT runtime, one activation arena,
  so a warm swap costs only the new engine; started with the first load, restarted by its
  monitor after a crash;
* ``worker_process``: one host per model (:func:`load_in_own_host`), closed with the model, so a
  swap returns all of the old version's memory to the OS.

Each model is a :class:`TrtHostModel` (a ``LoadedModel``) that adds what the hot-swap and the
profiling job ask of a TensorRT model: ``refittable``, :meth:`~TrtHostModel.refit_from_onnx`
and :meth:`~TrtHostModel.profile_layers`, each a request to its host.

Concurrency: the shared host is created once under ``_lock``; a model's requests are serialised
by its HostModel.
"""

from __future__ import annotations

import atexit
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agent.engines.onnx_rewrite import WireError, fold_constant_dequantize
from agent.engines.trt_interpreter import tensorrt_launch
from agent.errors import InferenceError, ModelLoadError
from agent.runtimes.base import TensorSpec
from agent.runtimes.host import HostConfig, TrtHost
from agent.runtimes.host_model import HostModel
from agent.trt_host import protocol as p

_lock = threading.Lock()
_shared: TrtHost | None = None

PROFILE_TIMEOUT_S = 600.0


def host_config() -> HostConfig:
    """The TensorRT host's configuration (TensorRTPythonMissing when nothing imports tensorrt)."""
    launch = tensorrt_launch()
    return HostConfig(interpreter=launch.interpreter, backend=launch.backend)


class TrtHostModel:
    """A TensorRT model in a host; ``own_host`` is closed with the model (worker mode)."""

    def __init__(self, model: HostModel[TrtHost], own_host: TrtHost | None = None) -> None:
        self.model = model
        self._own_host = own_host

    @property
    def inputs(self) -> Sequence[TensorSpec]:
        return self.model.inputs

    @property
    def outputs(self) -> Sequence[TensorSpec]:
        return self.model.outputs

    @property
    def host(self) -> TrtHost:
        return self.model.host

    @property
    def refittable(self) -> bool:
        return bool(self.model.info.get("refittable", False))

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.model.infer(feeds)

    def refit_from_onnx(self, onnx_path: Path) -> None:
        """New weights in place (the caller has drained the model); ModelLoadError if refused.
        The new version is prepared as its build was (constant DequantizeLinear folded,
        :mod:`agent.engines.onnx_rewrite`), so the weights carry the names the engine has."""
        with tempfile.TemporaryDirectory(prefix="jetfleet-refit-") as tmp:
            data = onnx_path.read_bytes()
            try:
                folded, changed = fold_constant_dequantize(data)
            except WireError as exc:
                raise ModelLoadError(f"refit of {self.model.path.name} refused: {exc}") from exc
            if changed:
                onnx_path = Path(tmp) / "prepared.onnx"
                onnx_path.write_bytes(folded)
            try:
                self.model.call(p.REFIT, {"onnx": str(onnx_path.absolute())}, PROFILE_TIMEOUT_S)
            except InferenceError as exc:
                raise ModelLoadError(f"refit of {self.model.path.name} refused: {exc}") from exc

    def profile_layers(
        self, feeds: Mapping[str, np.ndarray], runs: int, warmups: int
    ) -> list[tuple[str, float]]:
        """(layer, milliseconds) of each timed run, measured in the host by ``IProfiler``."""
        with tempfile.TemporaryDirectory(prefix="jetfleet-profile-") as tmp:
            path = Path(tmp) / "feeds.npz"
            arrays: dict[str, Any] = {name: np.asarray(value) for name, value in feeds.items()}
            np.savez(path, **arrays)
            body = {"feeds": str(path), "runs": runs, "warmups": warmups}
            reply = self.model.call(p.PROFILE, body, PROFILE_TIMEOUT_S)
        return [(str(name), float(ms)) for name, ms in reply["layers"]]

    def close(self) -> None:
        try:
            self.model.close()
        finally:
            if self._own_host is not None:
                self._own_host.close()


def shared_host() -> TrtHost:
    """The agent's one TensorRT host (started with the first call)."""
    global _shared
    with _lock:
        if _shared is None:
            host = TrtHost(host_config(), name="trt-host").start()
            atexit.register(host.close)
            _shared = host
        return _shared


def _options(streams: int, dla_core: int | None) -> dict[str, Any]:
    return {"streams": max(1, int(streams)), "dla_core": dla_core}


def load_in_shared_host(path: Path, streams: int = 1, dla_core: int | None = None) -> TrtHostModel:
    """Load the plan at ``path`` into the shared host (ModelLoadError with the host's reason)."""
    return TrtHostModel(shared_host().load(path, _options(streams, dla_core)))


def load_in_own_host(path: Path, streams: int = 1, dla_core: int | None = None) -> TrtHostModel:
    """Start a host for this model alone and load ``path`` into it."""
    host = TrtHost(host_config(), name=f"trt-host-{path.stem[:12]}").start()
    try:
        return TrtHostModel(host.load(path, _options(streams, dla_core)), own_host=host)
    except BaseException:
        host.close()
        raise
