"""A tune result whose recommended candidate name the controller cannot read (a device on a
newer agent, or a forged event) finishes its job with "nothing applied" and the reason: the job
stays readable (``jetfleet jobs show`` used to answer 500) and the device's desired document is
republished without it. Real SQLite, real Mosquitto."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller.jobs.service import JobService
from shared.jobs import Accuracy, CandidateResult, JobArtifact, JobOutcome, TuneJob, TuneResult
from shared.messages import Event
from tests.integration.fleet_parts import DesiredWatch, FleetParts, fleet_parts, now

DEVICE = "gw-tune-1"
JOB_ID = "j-00000000000000aa"


@pytest.fixture
def parts(sqlite_url: str, mosquitto: str, tmp_path: Path) -> Any:
    with fleet_parts(sqlite_url, mosquitto, tmp_path / "data") as made:
        yield made


def test_an_unreadable_recommended_candidate_applies_nothing_and_says_why(
    parts: FleetParts, mosquitto: str
) -> None:
    jobs = JobService(parts.job_store, parts.repo, parts.catalog, parts.configs, parts.fleet)
    parts.add_device(DEVICE)
    watch = DesiredWatch(mosquitto, parts.topics, DEVICE)
    try:
        job = TuneJob(
            job_id=JOB_ID,
            model="detector",
            version="1.0.0",
            artifact=JobArtifact(url="http://127.0.0.1:9/a", sha256="0" * 64, size=1),
            candidates=("fp16",),
        )
        parts.job_store.add(
            JOB_ID,
            "tune",
            DEVICE,
            job.model,
            job.version,
            job.model_dump(mode="json"),
            apply={"hardware_class": "orin-nano-8gb", "config": "detector"},
        )
        parts.fleet.touch(DEVICE)
        sent = watch.wait_for("the tune job in the desired document", lambda d: bool(d.jobs))

        row = CandidateResult(
            name="fp16+warp-drive",  # no such candidate part
            status="ok",
            latency_p50_ms=1.0,
            accuracy=Accuracy(checked="4 reference case(s) at fp16", within_tolerance=True),
        )
        outcome = JobOutcome(
            job_id=JOB_ID,
            job_kind="tune",
            status="succeeded",
            tune=TuneResult(
                model="detector", version="1.0.0", runtime="onnxruntime", runs=5, candidates=(row,)
            ),
        )
        parts.store_event(
            Event(
                device_id=DEVICE,
                event_id="ev-tune-1",
                ts=now(),
                kind="job_result",
                data=outcome.model_dump(mode="json"),
            )
        )

        job = jobs.get(JOB_ID)
        assert job.status == "succeeded"
        assert job.applied is not None
        assert job.applied["stored"] is False
        assert "warp-drive" in job.applied["error"]
        assert parts.configs.layers("detector") == []
        done = watch.wait_for("the job gone from the desired document", lambda d: not d.jobs)
        assert done.generation > sent.generation
    finally:
        watch.close()
