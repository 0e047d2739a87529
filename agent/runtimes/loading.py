"""Load an engine file with its runtime: the one table from a runtime's name to its loader.

Each loader takes the same arguments (the file, the intra-op thread count, the slot's delegate
config, the TensorRT stream count) and keeps what its runtime uses: ONNX Runtime the delegate's
providers and graph options, TensorRT the streams and the delegate's DLA core. ONNX Runtime is
imported with its first load, not at agent start (an idle agent saves ~20 MB of RSS);
TensorRT is never imported here: its models load into the agent's shared TensorRT host
(:mod:`agent.runtimes.trt_hosts`), started with the first one. Names are the descriptors'
(:mod:`agent.hardware.runtime_kinds`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from agent.hardware.runtime_kinds import ONNXRUNTIME, TENSORRT, runtime_kind
from agent.runtimes.base import LoadedModel
from shared.delegate import DelegateConfig


@dataclass(frozen=True)
class LoadOptions:
    """What a loader may use of a slot: threads, delegate config, TensorRT streams, and where
    ONNX Runtime's TensorRT execution provider keeps what it builds (``engine_cache_dir``, one
    directory per ``engine_key``), so a restart loads instead of rebuilding."""

    intra_op_threads: int = 1
    delegate: DelegateConfig | None = None
    streams: int = 1
    engine_cache_dir: Path | None = None
    engine_key: str | None = None


EngineLoader = Callable[[Path, LoadOptions], LoadedModel]
"""``(path, options)`` → the loaded engine (ModelLoadError)."""


def _load_ort(path: Path, o: LoadOptions) -> LoadedModel:
    from agent.runtimes.ort import load_ort  # streams: ONNX Runtime runs one session per engine

    return load_ort(
        path,
        intra_op_threads=o.intra_op_threads,
        delegate=o.delegate,
        engine_cache_dir=o.engine_cache_dir,
        engine_key=o.engine_key,
    )


def _load_trt(path: Path, o: LoadOptions) -> LoadedModel:
    from agent.runtimes.trt_hosts import load_in_shared_host  # threads: TensorRT schedules its own

    dla = o.delegate.dla_core if o.delegate is not None else None
    return load_in_shared_host(path, streams=o.streams, dla_core=dla)


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
    engine_cache_dir: Path | None = None,
    engine_key: str | None = None,
) -> LoadedModel:
    """Load ``path`` with ``runtime`` (UnknownRuntime for a name the agent does not know).

    Without ``delegate``: ONNX Runtime on the CPU provider, TensorRT on the GPU (no DLA).
    """
    loader = LOADERS[runtime_kind(runtime).name]
    options = LoadOptions(intra_op_threads, delegate, streams, engine_cache_dir, engine_key)
    return loader(path, options)
