"""The whole loop with real processes: push → deploy → infer over HTTP → telemetry in the database.

Two agents as separate processes against the real Mosquitto and a fresh PostgreSQL database; the
controller is ``jetfleet serve`` in its own process too.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import onnxruntime as ort
import pytest
import sqlalchemy as sa

from controller.client.http import ControllerClient
from controller.demo import sample_models
from controller.demo.fleet import (
    DEMO_GATEWAYS,
    DemoFleet,
    all_desired_serving,
    infer,
    random_inputs,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture
def client(fleet: DemoFleet) -> Iterator[ControllerClient]:
    with fleet.client() as client:
        yield client


@pytest.fixture
def fleet(tmp_path: Path, mosquitto: str, postgres_url: str) -> Iterator[DemoFleet]:
    fleet = DemoFleet(
        tmp_path,
        broker_url=mosquitto,
        db_url=postgres_url,
        topic_prefix=f"e2e-{uuid.uuid4().hex[:8]}/v1",
        telemetry_interval_s=1.0,
    )
    try:
        fleet.start_controller()
        yield fleet
    finally:
        fleet.stop()
    for proc in fleet.processes:
        assert proc.popen.returncode is not None, f"{proc.name} still running"


def test_push_deploy_infer_and_telemetry_reach_the_database(
    fleet: DemoFleet, client: ControllerClient, postgres_url: str
) -> None:
    gateways = DEMO_GATEWAYS[:2]
    classifier = sample_models.classifier()
    anomaly = sample_models.anomaly()
    client.push_model_bytes(classifier, "classifier", "1.0.0")
    client.push_model_bytes(anomaly, "anomaly", "1.0.0")
    for gw in gateways:
        fleet.start_gateway(gw)
    fleet.label_gateways(gateways)

    client.deploy({"model": "classifier", "version": "1.0.0", "selector": "fleet=demo"})
    client.deploy({"model": "anomaly", "version": "1.0.0", "device": gateways[1].device_id})
    devices: list[dict[str, Any]] = wait_for(
        "all slots serving",
        lambda: (ds := client.devices()) and all_desired_serving(ds) and ds,
        120,
        fleet.processes,
    )
    slots = {(d["id"], s["name"]) for d in devices for s in d["reported"]}
    assert slots == {
        (gateways[0].device_id, "classifier"),
        (gateways[1].device_id, "classifier"),
        (gateways[1].device_id, "anomaly"),
    }
    facts = {d["id"]: d["facts"] for d in devices}
    assert all(f["simulated"] for f in facts.values()), "simulated profiles must say so"

    # Real inference over HTTP on every gateway; the answer equals ONNX Runtime run directly.
    rng = np.random.default_rng(1)
    reference = {
        "classifier": ort.InferenceSession(classifier, providers=["CPUExecutionProvider"]),
        "anomaly": ort.InferenceSession(anomaly, providers=["CPUExecutionProvider"]),
    }
    sent: dict[tuple[str, str], int] = {}
    with httpx.Client(timeout=10) as http:
        for d in devices:
            for s in d["desired"]:
                spec = client.model_version(s["name"], s["version"])
                for _ in range(5):
                    body = random_inputs(spec, rng)
                    out = infer(d["serve_url"], s["name"], body, http)
                    feed = {
                        i["name"]: np.asarray(i["data"], np.float32).reshape(i["shape"])
                        for i in body["inputs"]
                    }
                    expected = reference[s["name"]].run(None, feed)[0]
                    got = np.asarray(out["outputs"][0]["data"], np.float32)
                    np.testing.assert_allclose(got, expected.ravel(), rtol=1e-5, atol=1e-6)
                    sent[(d["id"], s["name"])] = sent.get((d["id"], s["name"]), 0) + 1

    # Telemetry with those requests is stored in the controller's database.
    engine = sa.create_engine(postgres_url)

    def stored_requests() -> dict[tuple[str, str], int]:
        counts: dict[tuple[str, str], int] = {}
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT device_id, models FROM telemetry_samples"))
            for device_id, models in rows:
                for m in models:
                    key = (device_id, m["name"])
                    counts[key] = counts.get(key, 0) + m["requests"]
        return counts

    try:
        wait_for("telemetry counting every request", lambda: stored_requests() == sent, 30)
    finally:
        engine.dispose()
    assert set(sent) == slots
