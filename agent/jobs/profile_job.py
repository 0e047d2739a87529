"""A profiling job: where the served engine of a model spends an inference's time.

The job loads the engine the slot serves now a second time, beside it (memory reserved in the
agent's budget for as long as the job holds it), runs it with the reference inputs (or seeded
random ones) and reads per-node times from ONNX Runtime's profiler or TensorRT's ``IProfiler``;
:mod:`agent.jobs.profiling` sums them into top operators and layers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.hardware.runtime_kinds import TENSORRT, runtime_kind
from agent.jobs.profiling import NodeRecord, ort_trace_records, summarize
from agent.jobs.resources import JobContext, JobFailed
from agent.jobs.tuning_bench import BenchCancelled, feeds_for
from agent.swap.admission import need_of
from agent.swap.validation import Reference
from shared.jobs import ProfileJob, ProfileResult


def run_profile(ctx: JobContext, job: ProfileJob, work: Path) -> ProfileResult:
    """Profile ``job.model``'s active engine; JobFailed when it has none or it does not fit."""
    host = ctx.host
    view = host.view()
    record = view.get(job.model)
    if record is None or record.engine is None or record.active_version is None:
        raise JobFailed(
            f"model {job.model!r} has no active engine on this device: deploy it and wait "
            "until it serves, then profile again"
        )
    desired = view.desired
    slot = desired.slot(job.model) if desired is not None else None
    delegate = slot.delegate if slot is not None else None
    threads = slot.serving.intra_op_threads if slot is not None else 1
    same = slot is not None and slot.version == record.active_version
    reference = ctx.reference(slot.reference if same and slot else None)
    engine, runtime = record.engine.path, record.runtime or host.runtime
    size, kind = engine.stat().st_size, runtime_kind(runtime)
    with ctx.reserve_beside(need_of(size, kind.activation_estimate(size))) as reserved:
        if not reserved.granted:
            raise JobFailed(f"cannot profile beside the served models: {reserved.admission.reason}")
        ctx.progress(1, 2, f"profiling {job.model} {record.active_version}: {job.runs} runs")
        dla = delegate is not None and delegate.dla_core is not None
        if kind is TENSORRT:
            records, runs = _profile_trt(job, engine, reference, delegate)
        else:
            records, runs = _profile_ort(ctx, job, engine, reference, delegate, threads, work, dla)
    times = summarize(records, runs)
    ctx.progress(2, 2, f"profiled {runs} runs: {times.per_run_ms:.3f} ms per run")
    return ProfileResult(
        model=job.model,
        version=record.active_version,
        runtime=runtime,
        engine_key=record.engine.key,
        source=kind.profiler,
        runs=times.runs,
        total_ms=times.total_ms,
        per_run_ms=times.per_run_ms,
        device_shares=times.device_shares,
        ops=times.ops,
        layers=times.layers,
    )


def _profile_ort(
    ctx: JobContext,
    job: ProfileJob,
    engine: Path,
    reference: Reference | None,
    delegate: Any,
    threads: int,
    work: Path,
    dla: bool,
) -> tuple[list[NodeRecord], int]:
    from agent.runtimes.ort import load_ort

    model = load_ort(engine, intra_op_threads=threads, delegate=delegate, profile_dir=work)
    try:
        feeds = feeds_for(list(model.inputs), reference)
        for _ in range(job.warmups + job.runs):
            if ctx.cancelled():
                raise BenchCancelled("the agent is stopping")
            model.infer(feeds)
        trace = model.end_profiling()
    finally:
        model.close()
    if trace is None:
        raise JobFailed("ONNX Runtime wrote no profile")
    try:
        events = json.loads(trace.read_text())
    except ValueError as exc:
        raise JobFailed(f"ONNX Runtime's profile {trace.name} is not JSON: {exc}") from exc
    if not isinstance(events, list):
        raise JobFailed(f"ONNX Runtime's profile {trace.name} is not a trace event list")
    return ort_trace_records(events, skip_runs=job.warmups, dla=dla)


def _profile_trt(
    job: ProfileJob, engine: Path, reference: Reference | None, delegate: Any
) -> tuple[list[NodeRecord], int]:
    from agent.jobs.profiling_trt import profile_trt

    dla_core = delegate.dla_core if delegate is not None else None
    return profile_trt(
        engine, lambda specs: feeds_for(list(specs), reference), job.runs, job.warmups, dla_core
    )
