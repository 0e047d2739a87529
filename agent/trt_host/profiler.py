"""Per-layer times of an engine through ``trt.IProfiler`` (unchanged from 8.5 to the newest).

A subclass of ``trt.IProfiler`` (calling ``trt.IProfiler.__init__(self)``) is set as
``context.profiler``; TensorRT calls ``report_layer_time(layer_name, ms)`` once per layer after
every ``execute_async_v3``. Layer names are the ONNX node names when the engine was built with
profiling verbosity above NONE (:class:`~.build.BuildOptions` asks DETAILED). Warm-up runs are
not recorded. The profile uses its own context (own activation memory and buffers), closed after.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Tuple

import numpy as np

from .engine import Engine

LayerTime = Tuple[str, float]


def _profiler(trt: Any, records: List[LayerTime], recording: List[bool]) -> Any:
    class LayerProfiler(trt.IProfiler):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.IProfiler.__init__(self)

        def report_layer_time(self, layer_name: str, ms: float) -> None:
            if recording[0]:
                records.append((str(layer_name), float(ms)))

    return LayerProfiler()


def profile_layers(
    engine: Engine, feeds: Mapping[str, np.ndarray], runs: int = 10, warmups: int = 2
) -> List[LayerTime]:
    """(layer name, milliseconds) for every layer of each of ``runs`` timed runs."""
    records: List[LayerTime] = []
    recording = [False]
    context = engine.context()
    try:
        profiler = _profiler(engine.trt, records, recording)
        context.ctx.profiler = profiler
        for run in range(warmups + runs):
            recording[0] = run >= warmups
            context.infer(feeds)
    finally:
        context.close()
        engine.contexts.remove(context)
    return records
