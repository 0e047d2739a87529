"""Where an inference's time goes: per-node timings → top operators and layers (pure).

Two sources feed :func:`summarize`:

* ONNX Runtime's profiler (``SessionOptions.enable_profiling``) writes a Chrome-trace JSON list.
  :func:`ort_trace_records` reads it: every ``model_run`` (category ``Session``) is one inference,
  every ``<node>_kernel_time`` event (category ``Node``) one node execution, with the operator in
  ``args.op_name`` and the execution provider in ``args.provider``; durations are microseconds.
  The first ``skip_runs`` inferences are warm-ups (arena growth, first-touch page faults) and are
  left out by their time window.
* TensorRT's ``IProfiler`` reports one ``(layer name, ms)`` per layer and inference
  (:mod:`agent.jobs.profiling_trt`); :func:`trt_layer_op` names the operator from the layer name.

Shares are of the time spent in nodes (or layers), so the top operators always sum to at most 1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.hardware.runtime_kinds import TENSORRT
from shared.jobs import LayerTime, OpTime, ProcessingUnit

KERNEL_SUFFIX = "_kernel_time"
TOP = 10

_UNITS: dict[str, ProcessingUnit] = {
    "CPUExecutionProvider": "CPU",
    "CUDAExecutionProvider": "GPU",
    "TensorrtExecutionProvider": "GPU",
    TENSORRT.name: "GPU",  # the provider of TensorRT's own layer records
}
_TENSORRT_PROVIDERS = ("TensorrtExecutionProvider", TENSORRT.name)


@dataclass(frozen=True)
class NodeRecord:
    """One execution of one node or layer."""

    name: str
    op_type: str
    provider: str
    device: ProcessingUnit
    ms: float


@dataclass(frozen=True)
class ProfileTimes:
    """The summary of a profile: runs covered, total and per-run time, top ops and layers."""

    runs: int
    total_ms: float
    per_run_ms: float
    device_shares: dict[str, float]
    ops: tuple[OpTime, ...]
    layers: tuple[LayerTime, ...]


def processing_unit(provider: str, dla: bool = False) -> ProcessingUnit:
    """GPU, DLA or CPU for an execution provider (TensorRT runs on the DLA when ``dla``)."""
    unit = _UNITS.get(provider, "CPU")
    if dla and provider in _TENSORRT_PROVIDERS:
        return "DLA"
    return unit


def _windows(events: Sequence[Mapping[str, Any]], skip_runs: int) -> list[tuple[float, float]]:
    runs = sorted(
        (float(e.get("ts", 0)), float(e.get("ts", 0)) + float(e.get("dur", 0)))
        for e in events
        if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    return runs[skip_runs:]


def ort_trace_records(
    events: Sequence[Mapping[str, Any]], skip_runs: int = 0, dla: bool = False
) -> tuple[list[NodeRecord], int]:
    """Node executions of the runs after the first ``skip_runs``, and how many runs that is.

    A trace without ``model_run`` events (not written by ``InferenceSession.run``) yields every
    node, with the run count taken from the most frequent node.
    """
    windows = _windows(events, skip_runs)
    has_runs = any(e.get("name") == "model_run" for e in events)
    records: list[NodeRecord] = []
    for event in events:
        name = str(event.get("name", ""))
        if event.get("cat") != "Node" or not name.endswith(KERNEL_SUFFIX):
            continue
        ts = float(event.get("ts", 0))
        if has_runs and not any(start <= ts <= end for start, end in windows):
            continue
        args = event.get("args") or {}
        node = name[: -len(KERNEL_SUFFIX)]
        provider = str(args.get("provider") or "CPUExecutionProvider")
        records.append(
            NodeRecord(
                name=node,
                op_type=str(args.get("op_name") or node),
                provider=provider,
                device=processing_unit(provider, dla),
                ms=float(event.get("dur", 0)) / 1000.0,
            )
        )
    if has_runs:
        return records, len(windows)
    counts: dict[str, int] = {}
    for record in records:
        counts[record.name] = counts.get(record.name, 0) + 1
    return records, max(counts.values(), default=0)


_FOREIGN = re.compile(r"^\{ForeignNode\[")


def trt_layer_op(layer: str) -> str:
    """An operator name for a TensorRT layer: ``/stem/conv1/Conv + /stem/Relu`` → ``Conv``.

    TensorRT names fused layers after the ONNX nodes they contain; the first one's operator
    names the layer. Reformatting copies and DLA/Myelin foreign nodes keep their kind.
    """
    if layer.startswith("Reformatting CopyNode"):
        return "Reformat"
    if _FOREIGN.match(layer):
        return "ForeignNode"
    first = layer.split(" + ", 1)[0].strip()
    tail = first.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"_\d+$", "", tail) or layer


def summarize(records: Iterable[NodeRecord], runs: int, top: int = TOP) -> ProfileTimes:
    """Top operator types and nodes by total time, with their share of all node time."""
    by_op: dict[tuple[str, str, ProcessingUnit], list[float]] = {}
    by_node: dict[str, tuple[str, ProcessingUnit, float]] = {}
    by_unit: dict[str, float] = {}
    total = 0.0
    for r in records:
        by_op.setdefault((r.op_type, r.provider, r.device), []).append(r.ms)
        op, unit, ms = by_node.get(r.name, (r.op_type, r.device, 0.0))
        by_node[r.name] = (op, unit, ms + r.ms)
        by_unit[r.device] = by_unit.get(r.device, 0.0) + r.ms
        total += r.ms

    def share(ms: float) -> float:
        return min(1.0, ms / total) if total > 0 else 0.0

    ops = sorted(
        (
            OpTime(
                op_type=op,
                device=unit,
                provider=provider,
                calls=len(times),
                total_ms=round(sum(times), 4),
                share=round(share(sum(times)), 4),
            )
            for (op, provider, unit), times in by_op.items()
        ),
        key=lambda o: (-o.total_ms, o.op_type),
    )
    layers = sorted(
        (
            LayerTime(
                name=name, op_type=op, device=unit, total_ms=round(ms, 4), share=round(share(ms), 4)
            )
            for name, (op, unit, ms) in by_node.items()
        ),
        key=lambda layer: (-layer.total_ms, layer.name),
    )
    return ProfileTimes(
        runs=runs,
        total_ms=round(total, 4),
        per_run_ms=round(total / runs, 4) if runs else 0.0,
        device_shares={unit: round(share(ms), 4) for unit, ms in sorted(by_unit.items())},
        ops=tuple(_capped(ops[:top])),
        layers=tuple(_capped(layers[:top])),
    )


def _capped(items: Sequence[Any]) -> list[Any]:
    """Shares rounded independently can sum past 1 by a rounding step; trim the last ones."""
    result = list(items)
    excess = round(sum(i.share for i in result) - 1.0, 4)
    index = len(result) - 1
    while excess > 0 and index >= 0:
        cut = min(excess, result[index].share)
        result[index] = result[index].model_copy(
            update={"share": round(result[index].share - cut, 4)}
        )
        excess = round(excess - cut, 4)
        index -= 1
    return result
