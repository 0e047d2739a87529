"""Any replica answers any API request, with no sticky state."""

from __future__ import annotations

import hashlib

from controller.demo import sample_models
from tests.integration.controller.conftest import bearer, poll, set_labels
from tests.integration.replicas.conftest import Cluster
from tests.integration.rollouts.conftest import Fleet as SimFleet


def test_tokens_models_and_deploys_made_on_one_replica_work_on_another(
    cluster: Cluster, mosquitto: str
) -> None:
    a, b = cluster.start(2)
    sims = SimFleet(mosquitto, cluster.prefix)
    with cluster.api(a) as on_a, cluster.api(b) as on_b:
        try:
            # a token created on A works on B, and revoking it on B locks it out of A at once
            made = on_a.post("/api/v1/tokens", json={"name": "ci", "role": "operator"})
            assert made.status_code == 201, made.text
            token = made.json()["token"]
            who = on_b.get("/api/v1/whoami", headers=bearer(token))
            assert who.status_code == 200, who.text
            assert who.json()["name"] == "ci"
            gone = on_b.delete(f"/api/v1/tokens/{made.json()['id']}")
            assert gone.status_code in (200, 204), gone.text
            assert on_a.get("/api/v1/whoami", headers=bearer(token)).status_code == 401

            # a model pushed to A is listed by B and downloadable from B with HTTP Range
            model = sample_models.classifier(seed=3)
            pushed = on_a.put("/api/v1/models/detector/versions/1.0.0", content=model)
            assert pushed.status_code == 201, pushed.text
            listed = on_b.get("/api/v1/models").json()
            assert [m["name"] for m in listed] == ["detector"]
            version = on_b.get("/api/v1/models/detector/versions/1.0.0").json()
            assert version["sha256"] == hashlib.sha256(model).hexdigest()
            path = f"/api/v1/artifacts/{version['sha256']}"
            part = on_b.get(path, headers={"Range": "bytes=100-"})
            assert part.status_code == 206, part.text
            assert part.content == model[100:]
            assert part.headers["Content-Range"] == f"bytes 100-{len(model) - 1}/{len(model)}"

            # a deploy made on B shows on A, and the devices get it
            sims.start(3)
            poll(lambda: len(on_a.get("/api/v1/devices").json()) == 3, 30, "3 devices on A")
            for device_id, agent in sims.agents.items():
                set_labels(on_a, device_id, agent.labels)
            deployed = on_b.post(
                "/api/v1/deployments",
                json={"model": "detector", "version": "1.0.0", "selector": "site=plant"},
            )
            assert deployed.status_code == 200, deployed.text
            poll(
                lambda: all(a.active.get("detector") == "1.0.0" for a in sims.agents.values()),
                30,
                "every agent serving 1.0.0",
            )
            devices = on_a.get("/api/v1/devices").json()
            assert {d["desired"][0]["version"] for d in devices} == {"1.0.0"}
            poll(
                lambda: all(
                    d["observed_generation"] == d["desired_generation"]
                    for d in on_a.get("/api/v1/devices").json()
                ),
                30,
                "A to see every device at its desired generation",
            )
        finally:
            sims.stop()
