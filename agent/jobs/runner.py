"""Profiling and tuning jobs from the desired document, run once each on the jobs thread.

The reconcile loop hands every accepted desired document's jobs to :meth:`JobRunner.submit`; one
worker thread runs them one at a time, apart from the loop, so a long tuning run never delays a
swap or a report. Each job id runs once (:mod:`agent.jobs.journal`); a job found running at start
was interrupted by a restart and is reported failed, never run again. The kinds:
:mod:`agent.jobs.profile_job` and :mod:`agent.jobs.tune_job`; what they may use from the agent:
:mod:`agent.jobs.resources`.

Progress and results leave as events (kind ``job_progress`` / ``job_result``, ``data`` a
:class:`~shared.jobs.JobProgress` / :class:`~shared.jobs.JobOutcome`) through the agent's spool,
so a broker outage delays them but loses none.

The worker runs under :class:`shared.supervision.Supervised` (policy ``restart``): a job that
fails is reported failed, but anything that breaks the loop itself (the journal or the spool
failing) is logged and the loop runs again after a backoff; the jobs queued meanwhile wait.

Concurrency: ``submit`` runs on the loop thread, everything else on the worker; the journal and
the queued ids are shared under ``_lock``.
"""

from __future__ import annotations

import logging
import queue
import shutil
import threading
from collections.abc import Sequence
from typing import Literal

from agent.errors import AgentError
from agent.jobs.journal import JobJournal
from agent.jobs.profile_job import run_profile
from agent.jobs.resources import Emit, JobContext, JobResources
from agent.jobs.tune_job import run_tune
from agent.jobs.tuning_bench import BenchCancelled
from shared.jobs import Job, JobOutcome, ProfileJob
from shared.supervision import Supervised

log = logging.getLogger(__name__)


class JobRunner:
    """Runs jobs one at a time on its own thread; ``submit`` is called from the loop thread."""

    def __init__(self, host: JobResources, emit: Emit) -> None:
        self._host = host
        self._emit = emit
        self._dir = host.state_dir / "jobs"
        self.journal = JobJournal(self._dir)
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._queued: set[str] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.worker = Supervised(
            "jetfleet-jobs", self._run, policy="restart", stop=self._stopping, logger=log
        )

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
        self.worker.start()

    def stop(self) -> None:
        """Stop after the current candidate or run; an unfinished job stays ``running``."""
        self._stopping.set()
        self._queue.put(None)
        if self.worker.is_alive():
            self.worker.join(60)

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
            with self._lock:
                if self.journal.done(job.job_id):
                    continue
                self.journal.begin(job)
            self._execute(job)

    def _execute(self, job: Job) -> None:
        work = self._dir / job.job_id
        ctx = JobContext(self._host, job, self._emit, self._cancelled)
        outcome: JobOutcome | None = None
        try:
            work.mkdir(parents=True, exist_ok=True)
            if isinstance(job, ProfileJob):
                profile = run_profile(ctx, job, work)
                outcome = JobOutcome(
                    job_id=job.job_id, job_kind="profile", status="succeeded", profile=profile
                )
            else:
                tune = run_tune(ctx, job, work)
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
