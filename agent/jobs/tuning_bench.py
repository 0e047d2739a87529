"""One tuning candidate on the device: build → admit → load → warm up → timed runs → validate.

Every candidate is built in a child process like any engine (:mod:`agent.engines.build_runner`)
into the job's scratch directory, never into the engine cache, and loaded *beside* what the
device serves: admission (:mod:`agent.swap.admission`) counts every resident model and the measured
headroom, and a candidate that does not fit is skipped with the numbers instead of evicting
anything. Latency is timed per inference on one thread (p50/p99/mean, throughput = 1000/mean);
memory is what loading and warming the candidate took (RSS, free memory, or free device memory,
whichever moved most). Accuracy is the agent's own pre-swap check
(:mod:`agent.swap.validation`): the reference outputs at the candidate's precision tolerance,
so a candidate within tolerance here is one the device would accept when it is deployed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy loads with the first model, not at agent start (idle RSS)
    import numpy as np

from agent.engines.build_protocol import BuildRequest
from agent.engines.build_runner import BuildFailed, run_build
from agent.errors import AgentError
from agent.hardware.runtime_kinds import runtime_kind
from agent.runtimes.base import KSERVE_TO_NUMPY, LoadedModel, TensorSpec
from agent.runtimes.loading import load_engine
from agent.swap.admission import Admission, Need, need_of
from agent.swap.headroom import MemorySnapshot
from agent.swap.hotswap import malloc_trim
from agent.swap.validation import Reference, compare, cosine, top1_agreement, validate
from shared.delegate import DelegateConfig
from shared.jobs import Accuracy, CandidateResult, CandidateSpec, candidate_delegate


class BenchCancelled(AgentError):
    """The agent is stopping; the candidate was abandoned."""


@dataclass(frozen=True)
class BenchHost:
    """What a benchmark needs from the agent around it."""

    runtime: str
    """The runtime the agent serves with (onnxruntime or tensorrt)."""
    admit: Callable[[Need], Admission]
    snapshot: Callable[[], MemorySnapshot]
    available_providers: Callable[[], list[str]]
    build_timeout_s: float = 3600.0
    dla_cores: int | None = None
    cancelled: Callable[[], bool] = lambda: False


@dataclass(frozen=True)
class LatencyStats:
    """Per-inference latency of the timed runs."""

    p50_ms: float
    p99_ms: float
    mean_ms: float
    throughput_ips: float


def latency_stats(samples_ms: list[float]) -> LatencyStats:
    """p50, p99 and mean of ``samples_ms`` and the single-stream throughput they imply."""
    import numpy as np

    values = np.asarray(samples_ms, dtype=np.float64)
    mean = float(values.mean())
    return LatencyStats(
        p50_ms=round(float(np.percentile(values, 50)), 4),
        p99_ms=round(float(np.percentile(values, 99)), 4),
        mean_ms=round(mean, 4),
        throughput_ips=round(1000.0 / mean, 2) if mean > 0 else 0.0,
    )


def unavailable(spec: CandidateSpec, host: BenchHost) -> str | None:
    """Why ``spec`` cannot run on this device (None when it can)."""
    kind = runtime_kind(spec.runtime)
    if spec.runtime != host.runtime:
        return (
            f"not available on this device: {kind.label} candidates need the {kind.name} "
            f"runtime (this agent runs {host.runtime})"
        )
    if spec.dla_core is not None and host.dla_cores is not None and spec.dla_core >= host.dla_cores:
        have = "no DLA" if host.dla_cores == 0 else f"{host.dla_cores} DLA core(s)"
        return f"not available on this device: dla{spec.dla_core} requested, it has {have}"
    if kind.execution_providers and spec.ep in ("trt", "cuda"):
        provider = "TensorrtExecutionProvider" if spec.ep == "trt" else "CUDAExecutionProvider"
        if provider not in host.available_providers():
            return f"not available on this device: this ONNX Runtime has no {provider}"
    return None


def feeds_for(inputs: list[TensorSpec], reference: Reference | None) -> dict[str, np.ndarray]:
    """The first reference case, or seeded random data shaped like the inputs."""
    import numpy as np

    if reference is not None and all(s.name in reference.inputs for s in inputs):
        return {s.name: reference.inputs[s.name][0] for s in inputs}
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {}
    for spec in inputs:
        shape = tuple(d if d >= 0 else 1 for d in spec.shape)
        dtype = np.dtype(KSERVE_TO_NUMPY[spec.datatype])
        if dtype.kind == "f":
            feeds[spec.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[spec.name] = rng.integers(0, 8, shape).astype(dtype)
    return feeds


def accuracy_of(model: LoadedModel, reference: Reference | None, precision: str) -> Accuracy:
    """The model's outputs against ``reference`` with the tolerance of ``precision``."""
    import numpy as np

    if reference is None:
        report = validate(model, None, precision)
        return Accuracy(
            checked="no reference outputs: finite outputs only",
            within_tolerance=report.ok,
            problems=tuple(report.problems),
        )
    missing = [s.name for s in model.inputs if s.name not in reference.inputs]
    if missing:
        return Accuracy(
            checked="reference does not fit the model",
            within_tolerance=False,
            problems=(f"reference lacks input(s) {', '.join(missing)}",),
        )
    problems: list[str] = []
    diffs: list[float] = []
    cosines: list[float] = []
    top1s: list[float] = []
    for case in range(reference.cases):
        got = model.infer({s.name: reference.inputs[s.name][case] for s in model.inputs})
        for name, want_all in reference.outputs.items():
            want = want_all[case]
            if name not in got:
                problems.append(f"the model has no output {name!r} the reference has")
                continue
            problems += [f"case {case}: {p}" for p in compare(got[name], want, precision, name)]
            if got[name].shape == want.shape and np.all(np.isfinite(got[name])):
                diffs.append(float(np.max(np.abs(got[name].astype(np.float64) - want))))
                cosines.append(cosine(got[name], want))
                if want.ndim and want.shape[-1] > 1:
                    top1s.append(top1_agreement(got[name], want))
    return Accuracy(
        checked=f"{reference.cases} reference case(s) at {precision}",
        max_abs_diff=max(diffs) if diffs else None,
        min_cosine=round(min(cosines), 6) if cosines else None,
        min_top1=min(top1s) if top1s else None,
        within_tolerance=not problems,
        problems=tuple(problems[:5]),
    )


def _moved(before: MemorySnapshot, after: MemorySnapshot) -> int:
    deltas = [0]
    if before.rss_bytes is not None and after.rss_bytes is not None:
        deltas.append(after.rss_bytes - before.rss_bytes)
    if before.available_bytes is not None and after.available_bytes is not None:
        deltas.append(before.available_bytes - after.available_bytes)
    if before.device_free_bytes is not None and after.device_free_bytes is not None:
        deltas.append(before.device_free_bytes - after.device_free_bytes)
    return max(deltas)


def bench_candidate(
    spec: CandidateSpec,
    base: DelegateConfig,
    onnx_path: Path,
    reference: Reference | None,
    work_dir: Path,
    host: BenchHost,
    runs: int,
    warmups: int,
    power_mode: str | None = None,
    default_threads: int = 1,
) -> CandidateResult:
    """Build, load, time and validate one candidate; its row of the tuning table."""
    config = candidate_delegate(spec, base)
    kind = runtime_kind(spec.runtime)
    threads = spec.threads or default_threads
    row: dict[str, object] = {
        "name": spec.name,
        "power_mode": power_mode,
        "runtime": spec.runtime,
        "precision": config.precision,
        "threads": threads if kind.intra_op_threads else None,
    }
    why = unavailable(spec, host)
    if why is not None:
        return CandidateResult.model_validate({**row, "status": "unavailable", "reason": why})
    engine = work_dir / (re.sub(r"[^A-Za-z0-9-]+", "_", spec.name) + ".engine")
    request = BuildRequest(
        onnx_path=onnx_path, output_path=engine, config=config, dla_cores=host.dla_cores
    )
    try:
        built = run_build(kind.builder, request, host.build_timeout_s, cancelled=host.cancelled)
    except BuildFailed as exc:
        if host.cancelled():
            raise BenchCancelled(str(exc)) from exc
        return CandidateResult.model_validate({**row, "status": "failed", "reason": str(exc)})
    row["build_s"] = round(built.seconds, 3)
    try:
        return _measure(spec, config, built.output, reference, host, runs, warmups, threads, row)
    finally:
        built.output.unlink(missing_ok=True)


def _measure(
    spec: CandidateSpec,
    config: DelegateConfig,
    engine: Path,
    reference: Reference | None,
    host: BenchHost,
    runs: int,
    warmups: int,
    threads: int,
    row: Mapping[str, object],
) -> CandidateResult:
    size = engine.stat().st_size
    admission = host.admit(need_of(size, runtime_kind(spec.runtime).activation_estimate(size)))
    if admission.mode == "refuse":
        reason = f"does not fit beside the served models: {admission.reason}"
        return CandidateResult.model_validate({**row, "status": "skipped", "reason": reason})
    before = host.snapshot()
    try:
        model = load_engine(
            spec.runtime, engine, intra_op_threads=threads, delegate=config, streams=1
        )
    except AgentError as exc:
        return CandidateResult.model_validate({**row, "status": "failed", "reason": str(exc)})
    try:
        feeds = feeds_for(list(model.inputs), reference)
        samples: list[float] = []
        for run in range(warmups + runs):
            if host.cancelled():
                raise BenchCancelled("the agent is stopping")
            started = time.perf_counter()
            model.infer(feeds)
            if run >= warmups:
                samples.append((time.perf_counter() - started) * 1000.0)
        memory = _moved(before, host.snapshot())
        accuracy = accuracy_of(model, reference, config.precision)
    except BenchCancelled:
        raise
    except AgentError as exc:
        return CandidateResult.model_validate({**row, "status": "failed", "reason": str(exc)})
    finally:
        model.close()
        malloc_trim()
    stats = latency_stats(samples)
    return CandidateResult.model_validate(
        {
            **row,
            "status": "ok",
            "latency_p50_ms": stats.p50_ms,
            "latency_p99_ms": stats.p99_ms,
            "latency_mean_ms": stats.mean_ms,
            "throughput_ips": stats.throughput_ips,
            "memory_bytes": memory,
            "accuracy": accuracy,
        }
    )
