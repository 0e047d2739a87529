"""Profiling and tuning end to end: CLI → controller → desired document → real agent (ONNX
Runtime) → events → controller → CLI, over the real Mosquitto."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from controller.demo.sample_models import classifier
from shared.jobs import parse_candidate
from tests.analysis_models import mobilenet_v2_like
from tests.integration.controller.conftest import poll
from tests.integration.jobs.conftest import DEVICE, Fleet

pytestmark = pytest.mark.timeout(600)

MODEL = mobilenet_v2_like(size=64, classes=10)
CANDIDATES = ["ort-disable", "ort-all", "ort-all+threads=2", "fp16"]


def _json(output: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(output)
    return result


def test_profile_ranks_operators_by_their_time_and_shows_them_beside_the_analysis(
    fleet: Fleet,
) -> None:
    fleet.push("mnet", "1.0.0", MODEL)
    fleet.deploy_and_wait("mnet", "1.0.0")

    result = fleet.cli(
        "devices",
        "profile",
        DEVICE,
        "--model",
        "mnet",
        "--runs",
        "10",
        "--timeout",
        "120",
        "--json",
    )

    assert result.exit_code == 0, result.output
    assert "[2/2] profiled 10 runs" in result.stderr
    job = _json(result.stdout)
    assert job["status"] == "succeeded"
    profile = job["profile"]
    assert (profile["model"], profile["version"], profile["runtime"]) == (
        "mnet",
        "1.0.0",
        "onnxruntime",
    )
    assert profile["source"] == "onnxruntime-profiler"
    assert profile["runs"] == 10
    assert profile["engine_key"] == next(
        s["engine_key"] for s in fleet.device()["reported"] if s["name"] == "mnet"
    )
    ops = profile["ops"]
    assert ops, "no operator timed"
    # which operator is heaviest is ONNX Runtime's timing on a shared CPU (a layout reorder can
    # outrun a small Conv under load): the ranking is checked by the sort below, not guessed
    assert "Conv" in {o["op_type"] for o in ops}, (
        "the model's 40 convolutions are among its top ops"
    )
    assert sum(o["share"] for o in ops) <= 1.0 + 1e-9  # summing floats may round one ulp past 1.0
    assert [o["total_ms"] for o in ops] == sorted((o["total_ms"] for o in ops), reverse=True)
    assert {o["device"] for o in ops} == {"CPU"}
    assert profile["device_shares"] == {"CPU": 1.0}

    fleet.wait_analysed("mnet", "1.0.0")
    shown = fleet.cli("models", "show", "mnet:1.0.0")
    assert shown.exit_code == 0, shown.output
    assert "trt 10.1" in shown.output
    assert f"profile {DEVICE}:" in shown.output
    assert "Conv" in shown.output.split(f"profile {DEVICE}:")[1]

    table = fleet.cli("jobs", "show", job["id"])
    assert table.exit_code == 0, table.output
    assert "OPERATOR" in table.output
    assert "Conv" in table.output


def test_profile_of_a_model_the_device_does_not_serve_is_refused(fleet: Fleet) -> None:
    result = fleet.cli("devices", "profile", DEVICE, "--model", "nothing")

    assert result.exit_code == 1
    assert "is not deployed with model 'nothing'" in result.output
    assert result.output.count("\n") == 1


def test_tune_measures_every_candidate_recommends_the_fastest_within_tolerance_and_applies_it(
    fleet: Fleet,
) -> None:
    fleet.push("mnet", "1.0.0", MODEL)
    fleet.deploy_and_wait("mnet", "1.0.0")
    hw_class = fleet.device()["hardware_class"]

    result = fleet.cli(
        "tune",
        "mnet:1.0.0",
        "--device",
        DEVICE,
        "--candidates",
        ",".join(CANDIDATES),
        "--runs",
        "20",
        "--apply",
        hw_class,
        "--json",
    )

    assert result.exit_code == 0, result.output
    for step in range(1, len(CANDIDATES) + 1):
        assert f"[{step}/{len(CANDIDATES)}] " in result.stderr
    job = _json(result.stdout)
    rows = job["tune"]["candidates"]
    assert [r["name"] for r in rows] == CANDIDATES
    ran = [r for r in rows if r["runtime"] == "onnxruntime"]
    for row in ran:
        assert row["status"] == "ok", row
        assert 0 < row["latency_p50_ms"] <= row["latency_p99_ms"]
        assert row["throughput_ips"] > 0
        assert row["memory_bytes"] >= 0
        assert row["build_s"] > 0
        accuracy = row["accuracy"]
        assert accuracy["checked"].endswith("reference case(s) at fp32")
        assert accuracy["within_tolerance"] is True
        assert accuracy["max_abs_diff"] < 1e-3
        assert accuracy["min_cosine"] > 0.9999
    assert rows[2]["threads"] == 2
    trt = rows[3]
    assert trt["status"] == "unavailable"
    assert "not available on this device" in trt["reason"]

    fastest = min(ran, key=lambda r: r["latency_p50_ms"])
    assert job["recommendation"]["candidate"] == fastest["name"]
    applied = job["applied"]
    assert applied["stored"] is True
    assert (applied["config"], applied["scope"]) == ("mnet", f"class={hw_class}")

    resolved = fleet.cli(
        "configs", "resolve", DEVICE, "--model", "mnet", "--config", "mnet", "--json"
    )
    assert resolved.exit_code == 0, resolved.output
    out = _json(resolved.stdout)
    level = parse_candidate(fastest["name"]).opt_level
    assert out["delegate"]["onnxruntime"]["graph_optimization_level"] == level
    assert out["provenance"]["onnxruntime.graph_optimization_level"] == f"class={hw_class}"
    assert out["provenance"]["runtime"] == f"class={hw_class}"

    text = fleet.cli("jobs", "show", job["id"])
    assert text.exit_code == 0, text.output
    assert f"recommended: {fastest['name']}" in text.output
    assert "not available on this device" in text.output


def test_no_candidate_outside_the_tolerance_is_recommended_or_applied(fleet: Fleet) -> None:
    """Reference outputs the model cannot reproduce: every candidate ran, none is within the
    fp32 tolerance, so none is recommended and --apply stores nothing (exit 1)."""
    data = classifier()
    fleet.push("cls", "2.0.0", data)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    image = np.random.default_rng(3).standard_normal((2, 1, 3, 32, 32)).astype(np.float32)
    outputs = np.stack([session.run(None, {"image": i})[0] for i in image])
    buffer = io.BytesIO()
    np.savez(buffer, **{"input:image": image, "output:probabilities": outputs + 0.05})
    response = fleet.api.put(
        "/api/v1/models/cls/versions/2.0.0/reference", content=buffer.getvalue()
    )
    assert response.status_code == 200, response.text
    hw_class = fleet.device()["hardware_class"]

    result = fleet.cli(
        "tune",
        "cls:2.0.0",
        "--device",
        DEVICE,
        "--candidates",
        "ort-basic,ort-all",
        "--runs",
        "5",
        "--apply",
        hw_class,
    )

    assert result.exit_code == 1, result.output
    assert "recommended: none (no candidate stayed within its precision's tolerance)" in (
        result.output
    )
    assert "--apply stored nothing" in result.output
    assert "differs from the reference" in result.output
    jobs = fleet.api.get("/api/v1/jobs", params={"model": "cls"}).json()
    assert [j["status"] for j in jobs] == ["succeeded"]
    assert all(r["status"] == "ok" for r in jobs[0]["tune"]["candidates"])
    assert all(not r["accuracy"]["within_tolerance"] for r in jobs[0]["tune"]["candidates"])
    assert fleet.api.get("/api/v1/configs/cls").status_code == 404


def test_a_finished_job_leaves_the_desired_document_and_is_not_run_again(fleet: Fleet) -> None:
    fleet.push("mnet", "1.0.0", MODEL)
    fleet.deploy_and_wait("mnet", "1.0.0")
    result = fleet.cli("devices", "profile", DEVICE, "--model", "mnet", "--runs", "2", "--json")
    assert result.exit_code == 0, result.output
    job_id = _json(result.stdout)["id"]
    kept = fleet.state_dir / "desired.json"

    def without_job() -> dict[str, Any] | None:
        doc = _json(kept.read_text())
        return (
            doc
            if not doc.get("jobs") and doc["generation"] == fleet.device()["desired_generation"]
            else None
        )

    doc = poll(without_job, 30, "the agent to keep a desired document without the job")
    journal = _json((fleet.state_dir / "jobs" / "journal.json").read_text())
    assert job_id in journal["finished"]
    assert journal["running"] is None

    fleet.stop_agent()
    fleet.start_agent()
    poll(lambda: fleet.device()["online"], 30, "the restarted agent online")
    events = fleet.api.get(f"/api/v1/devices/{DEVICE}/events", params={"limit": 1000}).json()
    results = [e for e in events if e["kind"] == "job_result"]
    assert len(results) == 1, "a finished job ran again after a restart"
    assert doc["generation"] >= 1


def test_a_job_waits_for_an_offline_device_and_a_cancelled_one_never_runs(fleet: Fleet) -> None:
    fleet.push("mnet", "1.0.0", MODEL)
    fleet.deploy_and_wait("mnet", "1.0.0")
    fleet.stop_agent()
    waiting = fleet.cli("devices", "profile", DEVICE, "--model", "mnet", "--timeout", "1")
    assert waiting.exit_code == 1
    assert "still pending after 1 s (the device may be offline)" in waiting.output
    first = fleet.api.get("/api/v1/jobs", params={"device": DEVICE}).json()[0]["id"]
    cancelled = fleet.cli("devices", "profile", DEVICE, "--model", "mnet", "--no-wait")
    assert cancelled.exit_code == 0, cancelled.output
    job_id = cancelled.output.strip()
    out = fleet.cli("jobs", "cancel", job_id)
    assert out.exit_code == 0, out.output
    assert out.output.strip() == f"{job_id}: cancelled"

    fleet.start_agent()

    def status(job: str) -> str:
        shown = fleet.cli("jobs", "show", job, "--json")
        assert shown.exit_code == 0, shown.output
        return str(_json(shown.stdout)["status"])

    poll(
        lambda: status(first) == "succeeded", 120, "the waiting job to run once the device is back"
    )
    poll(
        lambda: (d := fleet.device())["observed_generation"] == d["desired_generation"],
        30,
        "the agent to observe the document without jobs",
    )
    events = fleet.api.get(f"/api/v1/devices/{DEVICE}/events", params={"limit": 1000}).json()
    assert [e["message"] for e in events if e["kind"] == "job_result"] == [
        f"profile job {first} succeeded"
    ], "the cancelled job ran"
    assert status(job_id) == "cancelled"
