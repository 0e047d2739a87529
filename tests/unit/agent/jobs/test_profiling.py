"""ONNX Runtime profile traces → top operators and layers (pure parsing of a real trace)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from agent.jobs.profiling import ort_trace_records, processing_unit, summarize, trt_layer_op
from agent.runtimes.ort import load_ort
from tests.analysis_models import mobilenet_v2_like

WARMUPS, RUNS = 3, 5


def real_trace(tmp_path: Path) -> list[dict[str, Any]]:
    """A trace ONNX Runtime wrote for WARMUPS + RUNS inferences of a MobileNetV2-style model."""
    model_file = tmp_path / "mnet.onnx"
    model_file.write_bytes(mobilenet_v2_like(size=32, classes=10))
    model = load_ort(model_file, profile_dir=tmp_path / "trace")
    image = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    for _ in range(WARMUPS + RUNS):
        model.infer({"image": image})
    trace = model.end_profiling()
    model.close()
    assert trace is not None
    events: list[dict[str, Any]] = json.loads(trace.read_text())
    return events


def test_a_real_trace_without_its_warmups_ranks_operators_and_layers_by_their_time(
    tmp_path: Path,
) -> None:
    """Which operator is heaviest is ONNX Runtime's timing on a shared machine (a layout
    ``ReorderOutput`` can outrun a small Conv under load), so the ranking is checked against the
    trace's own numbers, not against a guess of what this CPU finds slow."""
    records, runs = ort_trace_records(real_trace(tmp_path), skip_runs=WARMUPS)
    assert runs == RUNS
    per_node: dict[str, int] = {}
    for r in records:
        per_node[r.name] = per_node.get(r.name, 0) + 1
    assert set(per_node.values()) == {RUNS}, "every node counted once per timed run"
    by_op: dict[str, float] = {}
    by_node: dict[str, float] = {}
    for r in records:
        by_op[r.op_type] = by_op.get(r.op_type, 0.0) + r.ms
        by_node[r.name] = by_node.get(r.name, 0.0) + r.ms

    times = summarize(records, runs, top=5)

    assert times.ops[0].op_type == max(by_op, key=by_op.__getitem__)
    conv_nodes = {r.name for r in records if r.op_type == "Conv"}
    conv = [o for o in times.ops if o.op_type == "Conv"]
    assert conv, "the 40 convolutions of the model are among its five heaviest operators"
    assert conv[0].calls == RUNS * len(conv_nodes)
    shares = sum(o.share for o in times.ops)  # the top 5 of all ops: at most the whole run
    assert 0 < shares <= 1.0 + 1e-9, shares  # summing floats may round one ulp past 1.0
    assert len(times.ops) <= 5
    assert [o.total_ms for o in times.ops] == sorted((o.total_ms for o in times.ops), reverse=True)
    assert times.layers[0].name == max(by_node, key=by_node.__getitem__)
    assert times.device_shares == {"CPU": 1.0}
    assert times.per_run_ms == round(times.total_ms / RUNS, 4)


def test_the_whole_trace_counts_more_than_the_timed_runs(tmp_path: Path) -> None:
    events = real_trace(tmp_path)
    _, timed = ort_trace_records(events, skip_runs=WARMUPS)
    _, everything = ort_trace_records(events)
    assert (timed, everything) == (RUNS, WARMUPS + RUNS)


def _node(name: str, op: str, provider: str, ts: float, dur: float) -> dict[str, Any]:
    return {
        "cat": "Node",
        "name": f"{name}_kernel_time",
        "ts": ts,
        "dur": dur,
        "args": {"op_name": op, "provider": provider},
    }


def test_providers_map_to_the_unit_that_ran_the_node() -> None:
    events = [
        {"cat": "Session", "name": "model_run", "ts": 0, "dur": 1000},
        _node("conv", "Conv", "TensorrtExecutionProvider", 10, 600),
        _node("nms", "NonMaxSuppression", "CPUExecutionProvider", 700, 300),
        _node("late", "Relu", "CPUExecutionProvider", 5000, 999),
    ]
    records, runs = ort_trace_records(events)
    times = summarize(records, runs)
    assert runs == 1
    assert [(o.op_type, o.device, o.share) for o in times.ops] == [
        ("Conv", "GPU", 0.6667),
        ("NonMaxSuppression", "CPU", 0.3333),
    ]
    on_dla, _ = ort_trace_records(events, dla=True)
    assert on_dla[0].device == "DLA"
    assert processing_unit("CUDAExecutionProvider") == "GPU"


def test_tensorrt_layer_names_give_their_first_operator() -> None:
    assert trt_layer_op("/backbone/conv1/Conv + /backbone/act1/Relu") == "Conv"
    assert trt_layer_op("Reformatting CopyNode for Input Tensor 0 to /conv1/Conv") == "Reformat"
    assert trt_layer_op("{ForeignNode[/b0/Conv.../b3/Add]}") == "ForeignNode"
    assert trt_layer_op("/head/Gemm_12") == "Gemm"
