"""A tuning job: one row per candidate (and power mode) of a model, measured on this device.

Each candidate is built, admitted beside the served models, timed and validated by
:func:`agent.jobs.tuning_bench.bench_candidate`; its memory stays reserved in the agent's budget
until its row is done, so a swap on the loop thread meanwhile counts it. A candidate for another
power mode than the current one is skipped: tuning never switches modes under served models.
"""

from __future__ import annotations

from pathlib import Path

from agent.jobs.resources import JobContext
from agent.jobs.tuning_bench import BenchHost, bench_candidate
from agent.swap.admission import Admission, Need
from agent.swap.budget import Reservation
from agent.swap.validation import Reference
from shared.jobs import CandidateError, CandidateResult, TuneJob, TuneResult, parse_candidate


class CandidateMemory:
    """The reservations of the candidate being benchmarked, released when its row is done."""

    def __init__(self, ctx: JobContext) -> None:
        self._ctx = ctx
        self._held: list[Reservation] = []

    def admit(self, need: Need) -> Admission:
        reservation = self._ctx.reserve_beside(need)
        self._held.append(reservation)
        return reservation.admission

    def release(self) -> None:
        while self._held:
            self._held.pop().release()


def run_tune(ctx: JobContext, job: TuneJob, work: Path) -> TuneResult:
    """Every candidate of ``job`` in every power mode it names; progress after each row."""
    host = ctx.host
    modes: tuple[str | None, ...] = job.power_modes or (None,)
    steps = len(modes) * len(job.candidates)
    ctx.progress(0, steps, f"fetching {job.model} {job.version}")
    host.verify_model(job.model, job.version, job.artifact)
    onnx = host.fetch(job.artifact)
    reference = ctx.reference(job.reference)
    facts = host.facts()
    memory = CandidateMemory(ctx)
    bench = BenchHost(
        runtime=host.runtime,
        admit=memory.admit,
        snapshot=host.budget.probe.snapshot,
        available_providers=host.available_providers,
        build_timeout_s=host.build_timeout_s,
        dla_cores=facts.jetson.dla_cores if facts.jetson else None,
        cancelled=ctx.cancelled,
    )
    current = facts.jetson.power_mode if facts.jetson else None
    rows: list[CandidateResult] = []
    step = 0
    for mode in modes:
        for name in job.candidates:
            step += 1
            label = name if mode is None else f"{name}@{mode}"
            ctx.progress(step - 1, steps, f"{label}: starting")
            try:
                row = _candidate(ctx, job, name, mode, current, onnx, reference, work, bench)
            finally:
                memory.release()
            rows.append(row)
            ctx.progress(step, steps, _row_line(row), candidate=row)
    return TuneResult(
        model=job.model,
        version=job.version,
        runtime=host.runtime,
        runs=job.runs,
        candidates=tuple(rows),
    )


def _candidate(
    ctx: JobContext,
    job: TuneJob,
    name: str,
    mode: str | None,
    current: str | None,
    onnx: Path,
    reference: Reference | None,
    work: Path,
    bench: BenchHost,
) -> CandidateResult:
    try:
        spec = parse_candidate(name)
    except CandidateError as exc:
        return CandidateResult(name=name, power_mode=mode, status="failed", reason=str(exc))
    if mode is not None and mode != current:
        now = f"the current mode is {current}" if current else "this device has no nvpmodel"
        return CandidateResult(
            name=name,
            power_mode=mode,
            status="skipped",
            reason=f"power mode {mode} is not active ({now}); tuning does not switch modes "
            "under served models: set it with nvpmodel -m and tune again",
        )
    desired = ctx.host.view().desired
    slot = desired.slot(job.model) if desired is not None else None
    threads = slot.serving.intra_op_threads if slot is not None else 1
    return bench_candidate(
        spec,
        job.base,
        onnx,
        reference,
        work,
        bench,
        runs=job.runs,
        warmups=job.warmups,
        power_mode=mode,
        default_threads=threads,
    )


def _row_line(row: CandidateResult) -> str:
    if row.status != "ok":
        return f"{row.label}: {row.status}: {row.reason}"
    accuracy = row.accuracy
    verdict = "within tolerance" if accuracy and accuracy.within_tolerance else "OUT of tolerance"
    return (
        f"{row.label}: p50 {row.latency_p50_ms:.3f} ms, p99 {row.latency_p99_ms:.3f} ms, "
        f"{row.throughput_ips:.1f}/s, {verdict}"
    )
