"""Load an engine file with its runtime: the one table from a runtime's name to its loader.

Each loader takes the same arguments (the file, the intra-op thread count, the slot's delegate
config, the TensorRT stream count) and keeps what its runtime uses: ONNX Runtime the delegate's
providers and graph options, TensorRT the streams and the delegate's DLA core. The runtime is
imported with its first load, not at agent start: ONNX Runtime costs an idle agent ~20 MB of RSS,
TensorRT far more (issue 6). Names are the descriptors' (:mod:`agent.hardware.runtime_kinds`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from agent.hardware.runtime_kinds import ONNXRUNTIME, TENSORRT, runtime_kind
from agent.runtimes.base import LoadedModel
from shared.delegate import DelegateConfig

EngineLoader = Callable[[Path, int, "DelegateConfig | None", int], LoadedModel]
"""``(path, intra_op_threads, delegate, streams)`` → the loaded engine (ModelLoadError)."""


def _load_ort(
    path: Path, threads: int, delegate: DelegateConfig | None, streams: int
) -> LoadedModel:
    del streams  # ONNX Runtime runs one session per engine
    from agent.runtimes.ort import load_ort

    return load_ort(path, intra_op_threads=threads, delegate=delegate)


def _load_trt(
    path: Path, threads: int, delegate: DelegateConfig | None, streams: int
) -> LoadedModel:
    from agent.runtimes.trt import load_trt

    dla = delegate.dla_core if delegate is not None else None
    return load_trt(path, intra_op_threads=threads, streams=streams, dla_core=dla)


LOADERS: Mapping[str, EngineLoader] = MappingProxyType(
    {ONNXRUNTIME.name: _load_ort, TENSORRT.name: _load_trt}
)
"""Runtime name → its loader; one entry per descriptor in ``RUNTIMES``."""


def load_engine(
    runtime: str,
    path: Path,
    *,
    intra_op_threads: int = 1,
    delegate: DelegateConfig | None = None,
    streams: int = 1,
) -> LoadedModel:
    """Load ``path`` with ``runtime`` (UnknownRuntime for a name the agent does not know).

    Without ``delegate``: ONNX Runtime on the CPU provider, TensorRT on the GPU (no DLA).
    """
    loader = LOADERS[runtime_kind(runtime).name]
    return loader(path, intra_op_threads, delegate, streams)
