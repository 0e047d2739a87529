"""The agent's job runner: each job once, an interrupted one reported failed, a tune table."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.jobs.resources import JobResources
from agent.jobs.runner import JobRunner
from agent.slots.records import SlotsView
from agent.swap.budget import MemoryBudget
from agent.swap.headroom import HeadroomProbe
from controller.demo.sample_models import classifier
from shared.facts import DeviceFacts
from shared.jobs import JobArtifact, JobOutcome, JobProgress, ProfileJob, TuneJob
from shared.messages import ArtifactRef

FACTS = DeviceFacts(hostname="gw", os="linux", arch="x86_64")


class Events:
    """What the runner emits, in order, with a way to wait for one."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str | None, dict[str, Any]]] = []
        self.cond = threading.Condition()

    def __call__(self, kind: str, slot: str | None, message: str, **data: Any) -> None:
        with self.cond:
            self.items.append((kind, slot, data))
            self.cond.notify_all()

    def results(self) -> list[JobOutcome]:
        return [JobOutcome.model_validate(d) for k, _, d in self.items if k == "job_result"]

    def result_of(self, job_id: str, timeout: float = 120) -> JobOutcome:
        with self.cond:
            found = self.cond.wait_for(
                lambda: any(r.job_id == job_id for r in self.results()), timeout
            )
        assert found, f"no result for {job_id}"
        return next(r for r in self.results() if r.job_id == job_id)


def make_runner(state_dir: Path, events: Events, model_file: Path | None = None) -> JobRunner:
    def fetch(ref: ArtifactRef) -> Path:
        assert model_file is not None, "this test fetches nothing"
        return model_file

    host = JobResources(
        runtime="onnxruntime",
        state_dir=state_dir,
        view=SlotsView,
        facts=lambda: FACTS,
        budget=MemoryBudget(HeadroomProbe("cpu")),
        fetch=fetch,
        build_timeout_s=120,
    )
    return JobRunner(host, events)


@pytest.fixture
def runners() -> Iterator[list[JobRunner]]:
    made: list[JobRunner] = []
    yield made
    for runner in made:
        runner.stop()


def test_a_job_a_restart_interrupted_is_reported_failed_and_never_run(
    tmp_path: Path, runners: list[JobRunner]
) -> None:
    journal = tmp_path / "jobs" / "journal.json"
    journal.parent.mkdir(parents=True)
    running = {"job_id": "j-interrupted", "kind": "profile", "model": "classifier"}
    journal.write_text(json.dumps({"finished": [], "running": running}))
    events = Events()
    runner = make_runner(tmp_path, events)
    runners.append(runner)

    runner.start()
    runner.submit([ProfileJob(job_id="j-interrupted", model="classifier")])
    runner.submit([ProfileJob(job_id="j-after", model="classifier")])

    after = events.result_of("j-after")
    assert after.status == "failed"
    [interrupted, _] = events.results()
    assert interrupted.job_id == "j-interrupted"
    assert (interrupted.job_kind, interrupted.status) == ("profile", "failed")
    assert interrupted.error == "interrupted by an agent restart; create the job again"
    assert events.items[0][1] == "classifier"
    kept = json.loads(journal.read_text())
    assert kept == {"finished": ["j-interrupted", "j-after"], "running": None}


def test_a_finished_job_is_not_run_again_by_the_next_agent(
    tmp_path: Path, runners: list[JobRunner]
) -> None:
    first_events = Events()
    first = make_runner(tmp_path, first_events)
    runners.append(first)
    first.start()
    first.submit([ProfileJob(job_id="j-once", model="classifier")])
    outcome = first_events.result_of("j-once")
    assert outcome.status == "failed"
    assert outcome.error is not None
    assert "has no active engine on this device: deploy it" in outcome.error
    first.stop()

    events = Events()
    second = make_runner(tmp_path, events)
    runners.append(second)
    second.start()
    second.submit([ProfileJob(job_id="j-once", model="classifier")])
    second.submit([ProfileJob(job_id="j-next", model="classifier")])
    events.result_of("j-next")
    assert [r.job_id for r in events.results()] == ["j-next"]


def test_a_tune_job_reports_a_row_per_candidate_as_it_goes(
    tmp_path: Path, runners: list[JobRunner]
) -> None:
    model_file = tmp_path / "classifier.onnx"
    model_file.write_bytes(classifier())
    events = Events()
    runner = make_runner(tmp_path / "state", events, model_file)
    runners.append(runner)
    runner.start()
    sha = "0" * 64
    job = TuneJob(
        job_id="j-tune",
        model="classifier",
        version="1",
        artifact=JobArtifact(url="http://unused/", sha256=sha, size=1),
        candidates=("ort-basic", "fp16", "nonsense+1"),
        runs=3,
        warmups=1,
    )
    runner.submit([job])

    outcome = events.result_of("j-tune")

    assert outcome.status == "succeeded", outcome.error
    assert outcome.tune is not None
    basic, fp16, nonsense = outcome.tune.candidates
    assert basic.status == "ok"
    assert basic.latency_p50_ms is not None
    assert basic.accuracy is not None
    assert basic.accuracy.checked == "no reference outputs: finite outputs only"
    assert (fp16.status, nonsense.status) == ("unavailable", "failed")
    assert nonsense.reason is not None
    assert "unknown part 'nonsense'" in nonsense.reason
    rows = [
        JobProgress.model_validate(d).candidate
        for k, _, d in events.items
        if k == "job_progress" and d.get("candidate")
    ]
    assert [r.name for r in rows if r is not None] == ["ort-basic", "fp16", "nonsense+1"]
    assert not (tmp_path / "state" / "jobs" / "j-tune").exists(), "scratch engines left behind"


class FailingSpool(Events):
    """Events whose first job result cannot be sent (the spool's disk write fails once)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def __call__(self, kind: str, slot: str | None, message: str, **data: Any) -> None:
        if kind == "job_result" and not self.failed:
            self.failed = True
            raise OSError(28, "No space left on device")
        super().__call__(kind, slot, message, **data)


def test_the_jobs_thread_runs_the_next_job_after_its_loop_crashed(
    tmp_path: Path, runners: list[JobRunner], caplog: pytest.LogCaptureFixture
) -> None:
    events = FailingSpool()
    runner = make_runner(tmp_path, events)
    runners.append(runner)
    runner.start()

    runner.submit([ProfileJob(job_id="j-lost", model="classifier")])
    runner.submit([ProfileJob(job_id="j-next", model="classifier")])

    after = events.result_of("j-next")
    assert after.status == "failed"
    assert after.error is not None
    assert "has no active engine on this device" in after.error
    assert events.failed, "the first result met the failing spool"
    assert runner.worker.restarts == 1
    assert any("background thread jetfleet-jobs crashed" in r.message for r in caplog.records)
    assert runner.worker.last_error == "OSError: [Errno 28] No space left on device"
    assert [r.job_id for r in events.results()] == ["j-next"]
    kept = json.loads((tmp_path / "jobs" / "journal.json").read_text())
    assert kept == {"finished": ["j-lost", "j-next"], "running": None}
