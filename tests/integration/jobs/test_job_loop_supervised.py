"""The jobs thread keeps following job results after an unexpected error (it used to stop for
good): a device's result still finishes its job in ``jetfleet jobs ls`` and the job leaves the
device's desired document. Real SQLite, real Mosquitto; the injected failure is a jobs table
whose event read raises once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller.db.job_store import JobEvent, JobStore
from controller.db.session import make_engine
from controller.jobs.loop import JobLoop
from controller.jobs.service import JobService
from shared.jobs import JobOutcome, ProfileJob, ProfileResult
from shared.messages import Event
from tests.integration.controller.conftest import poll
from tests.integration.fleet_parts import DesiredWatch, FleetParts, fleet_parts, now

DEVICE = "gw-jobs-1"


class JobsTableFailingOnce(JobStore):
    """The jobs table; its first read of job events raises an unexpected error."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.failed = False

    def job_events(self, device_ids: Any, after_id: int) -> list[JobEvent]:
        if not self.failed:
            self.failed = True
            raise RuntimeError("injected: the job events could not be read")
        return super().job_events(device_ids, after_id)


@pytest.fixture
def parts(sqlite_url: str, mosquitto: str, tmp_path: Path) -> Any:
    engine = make_engine(sqlite_url)
    store = JobsTableFailingOnce(engine)
    try:
        with fleet_parts(sqlite_url, mosquitto, tmp_path / "data", job_store=store) as made:
            yield made
    finally:
        engine.dispose()


def test_a_result_finishes_its_job_after_the_jobs_thread_crashed(
    parts: FleetParts, mosquitto: str
) -> None:
    store = parts.job_store
    assert isinstance(store, JobsTableFailingOnce)
    jobs = JobService(store, parts.repo, parts.catalog, parts.configs, parts.fleet)
    parts.add_device(DEVICE)
    watch = DesiredWatch(mosquitto, parts.topics, DEVICE)
    loop = JobLoop(jobs, interval_s=0.05)
    try:
        job = ProfileJob(job_id="j-0123456789abcdef", model="detector", runs=5)
        store.add(job.job_id, "profile", DEVICE, job.model, None, job.model_dump(mode="json"))
        parts.fleet.touch(DEVICE)
        sent = watch.wait_for("the job in the desired document", lambda d: bool(d.jobs))
        assert [j.job_id for j in sent.jobs] == [job.job_id]

        # the device ran it and answered; ingest stored the event
        outcome = JobOutcome(
            job_id=job.job_id,
            job_kind="profile",
            status="succeeded",
            profile=ProfileResult(
                model="detector",
                version="1.0.0",
                runtime="onnxruntime",
                source="onnxruntime-profiler",
                runs=5,
                total_ms=5.0,
                per_run_ms=1.0,
            ),
        )
        event = Event(
            device_id=DEVICE,
            event_id="ev-result-1",
            ts=now(),
            kind="job_result",
            data=outcome.model_dump(mode="json"),
        )
        parts.store_event(event)

        loop.start()
        # `jetfleet jobs ls` reads the table as the jobs thread left it (no sync of its own)
        poll(
            lambda: jobs.find(DEVICE, None, None, 10)[0].status == "succeeded",
            30,
            "the job finished by the jobs thread",
        )
        assert store.failed, "the injected failure happened first"
        assert loop.restarts == 1
        done = watch.wait_for("the job gone from the desired document", lambda d: not d.jobs)
        assert done.generation > sent.generation
    finally:
        loop.stop()
        watch.close()
