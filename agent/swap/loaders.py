"""Which function loads a model file for a slot: the runtime and swap mode decide.

Runtimes are imported on the first load, not at agent start: ONNX Runtime costs an idle agent
~20 MB of RSS, TensorRT far more. In ``worker_process`` swap mode every load goes to a
child process (:mod:`agent.swap.worker`), which takes the file path and thread count only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent.runtimes.base import LoadedModel, ModelLoader
from agent.runtimes.loading import load_engine
from shared.messages import ModelSlot


def loader_for(runtime: str, swap_mode: str = "in_process") -> ModelLoader:
    """The plain loader of ``runtime`` (``path, intra_op_threads=`` → LoadedModel)."""
    if swap_mode == "worker_process":
        from agent.swap.worker import load_in_worker

        loader: ModelLoader = load_in_worker(runtime)
        return loader

    def load(path: Path, *, intra_op_threads: int = 1) -> LoadedModel:
        return load_engine(runtime, path, intra_op_threads=intra_op_threads)

    return load


def slot_loader(
    path: Path,
    slot: ModelSlot,
    *,
    runtime: str,
    swap_mode: str,
    fallback: ModelLoader,
    custom: bool,
    engine_key: str | None = None,
    engine_cache_dir: Path | None = None,
) -> Callable[[], LoadedModel]:
    """How to load ``path`` for ``slot`` (kept, so a failed cold swap can reload it).

    In-process loads of the agent's own runtimes get the slot's delegate config (TensorRT
    streams and DLA core; ONNX Runtime providers and graph optimisation); a ``custom`` loader
    (tests) and worker processes get the path and thread count only.
    """
    threads = slot.serving.intra_op_threads
    in_process = swap_mode == "in_process"
    if not custom and in_process:
        delegate = slot.delegate
        return lambda: load_engine(
            runtime,
            path,
            intra_op_threads=threads,
            delegate=delegate,
            streams=delegate.streams,
            engine_cache_dir=engine_cache_dir,
            engine_key=engine_key,
        )
    return lambda: fallback(path, intra_op_threads=threads)
