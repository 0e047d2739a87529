"""Profiling and tuning jobs from the desired document, run once each on a worker thread.

The reconcile loop hands every accepted desired document's jobs to :meth:`JobRunner.submit`; one
worker thread runs them one at a time, apart from the loop, so a long tuning run never delays a
swap or a report. Each job id runs once: the journal (``jobs/journal.json`` in the state
directory, replaced atomically) records the job running now and the ids finished. A job found
running at start was interrupted by a restart and is reported failed, never run again.

Progress and results leave as events (kind ``job_progress`` / ``job_result``, ``data`` a
:class:`~shared.jobs.JobProgress` / :class:`~shared.jobs.JobOutcome`) through the agent's spool,
so a broker outage delays them but loses none.
"""

from __future__ import annotations

import json
import logging
import queue
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent.durable_files import write_atomically
from agent.errors import AgentError
from agent.jobs.profiling import NodeRecord, ort_trace_records, summarize
from agent.jobs.tuning_bench import BenchCancelled, BenchHost, bench_candidate, feeds_for
from agent.slots.records import SlotRecord
from agent.swap.admission import Admission, Need, need_of
from agent.swap.hotswap import Candidate, HotSwapper
from agent.swap.journal import Pointer
from agent.swap.validation import Reference, ReferenceError, parse_reference
from shared.jobs import (
    CandidateError,
    CandidateResult,
    Job,
    JobArtifact,
    JobOutcome,
    JobProgress,
    ProfileJob,
    ProfileResult,
    TuneJob,
    TuneResult,
    parse_candidate,
)
from shared.messages import ArtifactRef, DesiredState, DeviceFacts

log = logging.getLogger(__name__)

JOURNAL = "journal.json"
KEEP_FINISHED = 256
"""Finished ids remembered; the controller drops a finished job from the next desired document,
so an id older than this many jobs cannot come back."""

Emit = Callable[..., None]
"""``emit(kind, slot, message, **data)``: the daemon's event publisher (thread-safe)."""


class JobFailed(AgentError):
    """The job cannot run or did not finish; the message says why and what to do."""


class JobJournal:
    """Which job runs now and which finished, kept across restarts (atomic replace)."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / JOURNAL
        self.finished: list[str] = []
        self.running: dict[str, str] | None = None
        """``job_id``, ``kind`` and ``model`` of the job running now."""
        try:
            data = json.loads(self._path.read_text())
            self.finished = [str(i) for i in data.get("finished", [])]
            running = data.get("running")
            self.running = {str(k): str(v) for k, v in running.items()} if running else None
        except FileNotFoundError:
            pass
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("ignored unreadable job journal %s: %s", self._path, exc)

    def _save(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self.finished = self.finished[-KEEP_FINISHED:]
        body = {"finished": self.finished, "running": self.running}
        write_atomically(self._path, json.dumps(body).encode())

    def begin(self, job: Job) -> None:
        self.running = {"job_id": job.job_id, "kind": job.kind, "model": job.model}
        self._save()

    def finish(self, job_id: str) -> None:
        if job_id not in self.finished:
            self.finished.append(job_id)
        if self.running is not None and self.running.get("job_id") == job_id:
            self.running = None
        self._save()

    def done(self, job_id: str) -> bool:
        return job_id in self.finished


@dataclass(frozen=True)
class JobHost:
    """What jobs need from the agent: its runtime, slots, swapper and settings."""

    runtime: str
    state_dir: Path
    records: Callable[[], Mapping[str, SlotRecord]]
    desired: Callable[[], DesiredState | None]
    facts: Callable[[], DeviceFacts]
    swapper: HotSwapper
    fetch: Callable[[ArtifactRef], Path]
    """The agent's downloader: a verified local copy of an artifact."""
    build_timeout_s: float = 3600.0
    available_providers: Callable[[], list[str]] = field(default=lambda: ort_providers())
    verify_model: Callable[[str, str, JobArtifact], None] = field(default=lambda *_: None)
    """Raises (ArtifactRefused) unless the job's model is signed with the fleet key."""


def ort_providers() -> list[str]:
    """The execution providers of the installed ONNX Runtime (none when it does not import)."""
    try:
        from agent.runtimes.ort import available_providers
    except ImportError:
        return []
    return available_providers()


def admit_beside(swapper: HotSwapper, need: Need, label: str) -> Admission:
    """Admission of an extra engine loaded next to every resident one (replacing none)."""
    probe = Candidate(
        name=f"job:{label}",
        version="-",
        sha256="0" * 64,
        load=lambda: None,  # type: ignore[arg-type,return-value]
        need=need,
        pointer=Pointer("-", "0" * 64, "", None, "-"),
    )
    return swapper.admit(probe)


def _ref(artifact: JobArtifact) -> ArtifactRef:
    return ArtifactRef(url=artifact.url, sha256=artifact.sha256, size=artifact.size)


class JobRunner:
    """Runs jobs one at a time on its own thread; ``submit`` is called from the loop thread."""

    def __init__(self, host: JobHost, emit: Emit) -> None:
        self._host = host
        self._emit = emit
        self._dir = host.state_dir / "jobs"
        self.journal = JobJournal(self._dir)
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._queued: set[str] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jetfleet-jobs", daemon=True)

    def start(self) -> None:
        """Report a job a restart interrupted, then start the worker."""
        interrupted = self.journal.running
        if interrupted is not None:
            job_id = interrupted.get("job_id", "")
            self.journal.finish(job_id)
            kind: Literal["profile", "tune"] = (
                "profile" if interrupted.get("kind") == "profile" else "tune"
            )
            try:
                outcome = JobOutcome(
                    job_id=job_id,
                    job_kind=kind,
                    status="failed",
                    error="interrupted by an agent restart; create the job again",
                )
            except ValueError:
                log.warning("job journal names an invalid running job %r; dropped", job_id)
            else:
                self._result(outcome, interrupted.get("model"))
        if self._dir.is_dir():
            for stale in self._dir.iterdir():
                if stale.is_dir():
                    shutil.rmtree(stale, ignore_errors=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the current candidate or run; an unfinished job stays ``running``."""
        self._stopping.set()
        self._queue.put(None)
        if self._thread.is_alive():
            self._thread.join(60)

    def submit(self, jobs: Sequence[Job]) -> None:
        """Queue the jobs not finished, running or queued yet."""
        with self._lock:
            for job in jobs:
                if self.journal.done(job.job_id) or job.job_id in self._queued:
                    continue
                self._queued.add(job.job_id)
                self._queue.put(job)

    def _cancelled(self) -> bool:
        return self._stopping.is_set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            job = self._queue.get()
            if job is None:
                return
            try:
                with self._lock:
                    if self.journal.done(job.job_id):
                        continue
                    self.journal.begin(job)
                self._execute(job)
            except Exception:
                log.exception("job %s could not be run or reported", job.job_id)

    def _execute(self, job: Job) -> None:
        work = self._dir / job.job_id
        outcome: JobOutcome | None = None
        try:
            work.mkdir(parents=True, exist_ok=True)
            if isinstance(job, ProfileJob):
                profile = self._profile(job, work)
                outcome = JobOutcome(
                    job_id=job.job_id, job_kind="profile", status="succeeded", profile=profile
                )
            else:
                tune = self._tune(job, work)
                outcome = JobOutcome(
                    job_id=job.job_id, job_kind="tune", status="succeeded", tune=tune
                )
        except BenchCancelled:
            log.info("job %s stopped with the agent; it is reported failed at restart", job.job_id)
        except (AgentError, OSError) as exc:
            outcome = JobOutcome(
                job_id=job.job_id, job_kind=job.kind, status="failed", error=str(exc)
            )
        except Exception as exc:
            log.exception("job %s failed unexpectedly", job.job_id)
            outcome = JobOutcome(
                job_id=job.job_id, job_kind=job.kind, status="failed", error=f"agent error: {exc!r}"
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if outcome is None:
            return
        with self._lock:
            self.journal.finish(job.job_id)
            self._queued.discard(job.job_id)
        self._result(outcome, job.model)

    def _result(self, outcome: JobOutcome, model: str | None) -> None:
        text = outcome.error or f"{outcome.job_kind} job {outcome.job_id} {outcome.status}"
        self._emit("job_result", model, text, **outcome.model_dump(mode="json"))

    def _progress(self, job: Job, step: int, steps: int, message: str, **extra: Any) -> None:
        progress = JobProgress(
            job_id=job.job_id,
            job_kind=job.kind,
            step=step,
            steps=steps,
            detail=message,
            **extra,
        )
        self._emit("job_progress", job.model, message, **progress.model_dump(mode="json"))

    def _reference(self, artifact: JobArtifact | None) -> Reference | None:
        if artifact is None:
            return None
        path = self._host.fetch(_ref(artifact))
        try:
            return parse_reference(path.read_bytes())
        except ReferenceError as exc:
            raise JobFailed(f"reference outputs: {exc}") from exc

    # --- profile -----------------------------------------------------------------------------

    def _profile(self, job: ProfileJob, work: Path) -> ProfileResult:
        host = self._host
        record = host.records().get(job.model)
        if record is None or record.engine is None or record.active_version is None:
            raise JobFailed(
                f"model {job.model!r} has no active engine on this device: deploy it and wait "
                "until it serves, then profile again"
            )
        desired = host.desired()
        slot = desired.slot(job.model) if desired is not None else None
        delegate = slot.delegate if slot is not None else None
        threads = slot.serving.intra_op_threads if slot is not None else 1
        same = slot is not None and slot.version == record.active_version
        reference = self._reference(_job_artifact(slot.reference) if same and slot else None)
        engine, runtime = record.engine.path, record.runtime or host.runtime
        size = engine.stat().st_size
        admission = admit_beside(
            host.swapper, need_of(size, size if runtime == "onnxruntime" else 0), job.job_id
        )
        if admission.mode == "refuse":
            raise JobFailed(f"cannot profile beside the served models: {admission.reason}")
        self._progress(job, 1, 2, f"profiling {job.model} {record.active_version}: {job.runs} runs")
        dla = delegate is not None and delegate.dla_core is not None
        source: Literal["onnxruntime-profiler", "tensorrt-iprofiler"] = "onnxruntime-profiler"
        if runtime == "tensorrt":
            records, runs = self._profile_trt(job, engine, reference, delegate)
            source = "tensorrt-iprofiler"
        else:
            records, runs = self._profile_ort(job, engine, reference, delegate, threads, work, dla)
        times = summarize(records, runs)
        self._progress(job, 2, 2, f"profiled {runs} runs: {times.per_run_ms:.3f} ms per run")
        return ProfileResult(
            model=job.model,
            version=record.active_version,
            runtime=runtime,
            engine_key=record.engine.key,
            source=source,
            runs=times.runs,
            total_ms=times.total_ms,
            per_run_ms=times.per_run_ms,
            device_shares=times.device_shares,
            ops=times.ops,
            layers=times.layers,
        )

    def _profile_ort(
        self,
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
                if self._cancelled():
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
        self, job: ProfileJob, engine: Path, reference: Reference | None, delegate: Any
    ) -> tuple[list[NodeRecord], int]:
        from agent.jobs.profiling_trt import profile_trt
        from agent.runtimes.trt import load_trt

        dla_core = delegate.dla_core if delegate is not None else None
        probe = load_trt(engine, dla_core=dla_core)
        try:
            feeds = feeds_for(list(probe.inputs), reference)
        finally:
            probe.close()
        return profile_trt(engine, feeds, job.runs, job.warmups, dla_core)

    # --- tune --------------------------------------------------------------------------------

    def _tune(self, job: TuneJob, work: Path) -> TuneResult:
        host = self._host
        modes: tuple[str | None, ...] = job.power_modes or (None,)
        steps = len(modes) * len(job.candidates)
        self._progress(job, 0, steps, f"fetching {job.model} {job.version}")
        host.verify_model(job.model, job.version, job.artifact)
        onnx = host.fetch(_ref(job.artifact))
        reference = self._reference(job.reference)
        facts = host.facts()
        bench = BenchHost(
            runtime=host.runtime,
            admit=lambda need: admit_beside(host.swapper, need, job.job_id),
            snapshot=host.swapper.probe.snapshot,
            available_providers=host.available_providers,
            build_timeout_s=host.build_timeout_s,
            dla_cores=facts.jetson.dla_cores if facts.jetson else None,
            cancelled=self._cancelled,
        )
        current = facts.jetson.power_mode if facts.jetson else None
        rows: list[CandidateResult] = []
        step = 0
        for mode in modes:
            for name in job.candidates:
                step += 1
                label = name if mode is None else f"{name}@{mode}"
                self._progress(job, step - 1, steps, f"{label}: starting")
                row = self._candidate(job, name, mode, current, onnx, reference, work, bench)
                rows.append(row)
                self._progress(job, step, steps, _row_line(row), candidate=row)
        return TuneResult(
            model=job.model,
            version=job.version,
            runtime=host.runtime,
            runs=job.runs,
            candidates=tuple(rows),
        )

    def _candidate(
        self,
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
        slot = desired.slot(job.model) if (desired := self._host.desired()) else None
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


def _job_artifact(ref: ArtifactRef | None) -> JobArtifact | None:
    return None if ref is None else JobArtifact(url=ref.url, sha256=ref.sha256, size=ref.size)


def _row_line(row: CandidateResult) -> str:
    if row.status != "ok":
        return f"{row.label}: {row.status}: {row.reason}"
    accuracy = row.accuracy
    verdict = "within tolerance" if accuracy and accuracy.within_tolerance else "OUT of tolerance"
    return (
        f"{row.label}: p50 {row.latency_p50_ms:.3f} ms, p99 {row.latency_p99_ms:.3f} ms, "
        f"{row.throughput_ips:.1f}/s, {verdict}"
    )
