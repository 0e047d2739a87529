"""Per-layer times of a TensorRT engine, measured in a TensorRT host by ``IProfiler``.

The profile runs in a TensorRT host of its own (:func:`agent.runtimes.trt_hosts.
load_in_own_host`), beside the serving one, so its engine copy, context and buffers leave with
that process. In the host (agent/trt_host/profiler.py) an ``IProfiler`` subclass is set as the
profile context's ``profiler``; TensorRT calls it once per layer after every run; warm-up runs
are not recorded. Layer names are the ONNX node names when the engine was built with profiling
verbosity above NONE (the host builds DETAILED), else layer indices.

On a DLA engine the layers TensorRT hands to the DLA appear as ``{ForeignNode[...]}`` layers;
they are attributed to the DLA and every other layer to the GPU **[UNVERIFIED: no Jetson was
available; the engine inspector's per-layer JSON would be the authoritative source]**.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from agent.hardware.runtime_kinds import TENSORRT
from agent.jobs.profiling import NodeRecord, trt_layer_op
from agent.runtimes.base import TensorSpec
from agent.runtimes.trt_hosts import load_in_own_host
from shared.jobs import ProcessingUnit

Feeds = Callable[[Sequence[TensorSpec]], Mapping[str, np.ndarray]]


def layer_records(layers: list[tuple[str, float]], dla: bool) -> list[NodeRecord]:
    """The host's (layer, ms) pairs as the profiling job's records."""
    records: list[NodeRecord] = []
    for name, ms in layers:
        device: ProcessingUnit = "DLA" if dla and name.startswith("{ForeignNode") else "GPU"
        records.append(NodeRecord(name, trt_layer_op(name), TENSORRT.name, device, float(ms)))
    return records


def profile_trt(
    path: Path,
    feeds: Feeds,
    runs: int,
    warmups: int = 2,
    dla_core: int | None = None,
) -> tuple[list[NodeRecord], int]:
    """Run the plan at ``path`` ``warmups + runs`` times on inputs ``feeds(model inputs)``; the
    layer records of the timed runs (ModelLoadError / InferenceError with the host's reason)."""
    model = load_in_own_host(path, dla_core=dla_core)
    try:
        layers = model.profile_layers(feeds(model.inputs), runs, warmups)
    finally:
        model.close()
    return layer_records(layers, dla_core is not None), runs
