"""Rollouts of agent releases against a real controller (SQLite and PostgreSQL), real HTTP and
the real Mosquitto, with simulated gateways that report their agent update over MQTT: waves
advance as devices confirm, a canary that rolls back stops the rollout before later waves get
the order, devices too old to update (or of an architecture without the release) are skipped,
a downgrade needs --allow-downgrade, the order is covered by the document's signature and is
absent from the documents of devices outside an agent rollout."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import httpx
from click.testing import CliRunner, Result

from agent.trust.signatures import verify
from controller.cli.main import cli
from controller.demo.sample_models import classifier
from controller.server import Controller
from shared.agent_releases import AgentUpdateStatus
from shared.codec import decode
from shared.manifests import document_payload
from shared.messages import DesiredState
from tests.integration.agent_releases.conftest import Gateways
from tests.integration.agent_releases.release_files import tree
from tests.integration.controller.conftest import admin_token, poll, set_labels
from tests.integration.signing.harness import active_key

TIMEOUT = 60


def cli_of(controller: Controller) -> Callable[..., Result]:
    runner = CliRunner(env={"JETFLEET_TOKEN": admin_token(controller)})
    return lambda *args: runner.invoke(cli, [*args, "--url", controller.http_url])


def enrol(api: httpx.Client, gateways: Gateways, labels: dict[str, dict[str, str]]) -> None:
    """Wait for every gateway's report (its agent version stored), label each, deploy a model
    to all of them (so each has a desired document) and wait until they serve it."""

    def reported() -> bool:
        devices = {d["id"]: d for d in api.get("/api/v1/devices").json()}
        return all(
            d in devices and devices[d]["agent_version"] == a.agent_version
            for d, a in gateways.agents.items()
        )

    poll(reported, TIMEOUT, "every gateway's agent version stored")
    for device_id, device_labels in labels.items():
        set_labels(api, device_id, device_labels)
    pushed = api.put("/api/v1/models/detector/versions/1.0.0", content=classifier(seed=1))
    assert pushed.status_code == 201, pushed.text
    for device_id in gateways.agents:
        deployed = api.post(
            "/api/v1/deployments",
            json={"model": "detector", "version": "1.0.0", "device": device_id},
        )
        assert deployed.status_code == 200, deployed.text
    poll(
        lambda: all(a.active.get("detector") == "1.0.0" for a in gateways.agents.values()),
        TIMEOUT,
        "every gateway serving detector 1.0.0",
    )


def finished(api: httpx.Client, rollout_id: str) -> dict[str, Any] | None:
    out = api.get(f"/api/v1/rollouts/{rollout_id}").json()
    return None if out["state"] in ("pending", "running", "paused") else dict(out)


def last_document(raw: list[bytes]) -> dict[str, Any]:
    assert raw, "the device got no desired document"
    return dict(json.loads(raw[-1]))


def test_waves_advance_as_devices_confirm(
    db_controller: Controller, db_api: httpx.Client, gateways: Gateways
) -> None:
    for i in range(4):
        gateways.add(f"gw-{i:02d}")
    gateways.add("gw-old", agent_version="0.1.0")
    gateways.add("gw-arm", arch="aarch64")
    gateways.add("gw-lab")
    plant = {"site": "plant"}
    enrol(
        db_api,
        gateways,
        {d: plant for d in gateways.agents if d != "gw-lab"} | {"gw-lab": {"site": "lab"}},
    )
    pushed = db_api.post("/api/v1/agent/releases", content=tree("0.3.0", "x86_64"))
    assert pushed.status_code == 201, pushed.text

    jetfleet = cli_of(db_controller)
    started = jetfleet(
        "agent", "rollout", "start", "0.3.0", "--selector", "site=plant",
        "--waves", "1,50%,100%", "--canary", "gw-00", "--device-timeout", "30",
    )  # fmt: skip
    assert started.exit_code == 0, started.output
    assert "agent release 0.3.0 to 4 device(s) in 3 wave(s), 2 skipped" in started.stdout
    assert "skipped gw-old: its agent 0.1.0 is older than 0.2.0" in started.stderr
    assert "skipped gw-arm: no release 0.3.0 for its architecture aarch64" in started.stderr
    rid = started.stdout.split("started rollout ")[1].split(":")[0]

    out = poll(lambda: finished(db_api, rid), TIMEOUT, "the agent rollout to finish")
    assert out["state"] == "succeeded", out
    assert out["kind"] == "agent"
    assert out["model"] == "jetfleet-agent"
    targets = {t["device_id"]: t for t in out["targets"]}
    updated = [f"gw-{i:02d}" for i in range(4)]
    assert {d: targets[d]["status"] for d in updated} == dict.fromkeys(updated, "succeeded")
    assert {d: targets[d]["previous_version"] for d in updated} == dict.fromkeys(updated, "0.2.0")
    assert targets["gw-old"]["status"] == targets["gw-arm"]["status"] == "skipped"
    assert "gw-lab" not in targets
    # waves in order: the canary alone first, each wave started after the last one passed
    assert [targets[d]["wave"] for d in updated] == [1, 2, 3, 3]
    assert targets["gw-00"]["validated_at"] <= targets["gw-01"]["started_at"]
    assert targets["gw-01"]["validated_at"] <= targets["gw-02"]["started_at"]

    for device_id in updated:
        agent = gateways.agents[device_id]
        assert agent.agent_version == "0.3.0"
        assert {o.version for o in agent.orders} == {"0.3.0"}
        order = agent.orders[0]
        assert order.arch == "x86_64"
        assert order.artifact.format == "tar.gz"
        assert not order.allow_downgrade
        # the device rolls back by itself before the rollout's 30 s device timeout fails it
        assert order.confirm_within_s == 30
        assert order.artifact.signed is not None
        assert order.artifact.signed.manifest.kind == "agent"
    # the devices outside the rollout never got an order: their documents have no agent key
    for device_id in ("gw-old", "gw-arm", "gw-lab"):
        agent = gateways.agents[device_id]
        assert agent.orders == []
        assert all("agent" not in json.loads(raw) for raw in agent.raw)

    # the document's signature covers the order: change the order and it no longer verifies
    key = active_key(db_controller.settings)
    document = next(d for d in reversed(gateways.agents["gw-00"].raw) if b'"agent"' in d)
    doc = decode(DesiredState, document)
    assert doc.signature is not None
    assert doc.agent is not None
    assert verify(key.public_key, document_payload(doc), doc.signature.signature)
    forged = doc.model_copy(update={"agent": doc.agent.model_copy(update={"version": "9.9.9"})})
    assert not verify(key.public_key, document_payload(forged), doc.signature.signature)

    # visibility: devices ls / show and their JSON
    listed = jetfleet("devices", "ls")
    assert listed.exit_code == 0, listed.output
    assert "AGENT" in listed.stdout
    assert "UPDATE" in listed.stdout
    row = next(line for line in listed.stdout.splitlines() if line.startswith("gw-01"))
    assert "0.3.0" in row
    assert "confirmed 0.3.0" in row
    shown = json.loads(jetfleet("devices", "show", "gw-02", "--json").stdout)
    assert shown["agent_version"] == "0.3.0"
    assert shown["agent_update"]["phase"] == "confirmed"
    assert shown["agent_update"]["previous"] == "0.2.0"
    page = db_api.get("/dashboard")
    assert page.status_code == 200, page.text
    assert "<th>agent</th>" in page.text
    assert "confirmed 0.3.0</div>" in page.text
    rollouts = jetfleet("rollouts", "ls")
    assert rid in rollouts.stdout
    assert "jetfleet-agent 0.3.0" in rollouts.stdout


def test_a_canary_that_rolls_back_stops_the_rollout(
    controller: Controller, api: httpx.Client, gateways: Gateways
) -> None:
    gateways.add("gw-00", outcome="roll_back")
    for i in range(1, 4):
        gateways.add(f"gw-{i:02d}")
    enrol(api, gateways, {d: {"site": "plant"} for d in gateways.agents})
    assert api.post("/api/v1/agent/releases", content=tree("0.3.0")).status_code == 201
    body = {
        "kind": "agent",
        "version": "0.3.0",
        "targets": {"selector": "site=plant"},
        "strategy": {"waves": "1,50%,100%", "canary": ["gw-00"], "device_timeout_s": 30},
    }
    created = api.post("/api/v1/rollouts", json=body)
    assert created.status_code == 201, created.text
    rid = created.json()["id"]

    out = poll(lambda: finished(api, rid), TIMEOUT, "the agent rollout to stop")
    assert out["state"] == "failed", out
    assert "1 device(s) failed" in out["reason"]
    targets = {t["device_id"]: t for t in out["targets"]}
    assert targets["gw-00"]["status"] == "failed"
    assert targets["gw-00"]["reason"].startswith(
        "the device rolled back to 0.2.0: the new agent exited at start"
    )
    for device_id in ("gw-01", "gw-02", "gw-03"):
        assert targets[device_id]["status"] == "skipped"
        assert targets[device_id]["generation"] is None
        # later waves never got the order; they stay on the old release
        assert gateways.agents[device_id].orders == []
        assert gateways.agents[device_id].agent_version == "0.2.0"
    # the canary's order is withdrawn: its newest document carries none
    canary = gateways.agents["gw-00"]
    poll(lambda: "agent" not in last_document(canary.raw), TIMEOUT, "the order withdrawn")
    device = api.get("/api/v1/devices/gw-00").json()
    assert device["agent_version"] == "0.2.0"
    assert device["agent_update"]["phase"] == "rolled_back"

    jetfleet = cli_of(controller)
    refused = jetfleet("rollouts", "rollback", rid)
    assert refused.exit_code == 1
    assert "is an agent rollout" in refused.output
    shown = jetfleet("rollouts", "show", rid)
    assert "agent jetfleet-agent 0.3.0" in shown.stdout
    assert "state: failed" in shown.stdout


def test_a_downgrade_needs_the_flag(
    controller: Controller, api: httpx.Client, gateways: Gateways
) -> None:
    gateways.add("gw-00", agent_version="0.3.0")
    gateways.add("gw-01", agent_version="0.3.0")
    enrol(api, gateways, {d: {"site": "plant"} for d in gateways.agents})
    assert api.post("/api/v1/agent/releases", content=tree("0.2.5")).status_code == 201

    missing = api.post("/api/v1/rollouts", json={"kind": "agent", "version": "0.9.0"})
    assert missing.status_code == 404
    assert "no agent release 0.9.0" in missing.json()["detail"]
    body = {"kind": "agent", "version": "0.2.5", "targets": {"selector": "site=plant"}}
    refused = api.post("/api/v1/rollouts", json=body)
    assert refused.status_code == 409, refused.text
    assert "release 0.2.5 is older than the agent of 2 device(s)" in refused.json()["detail"]
    assert "--allow-downgrade" in refused.json()["detail"]
    assert api.get("/api/v1/rollouts").json() == []

    started = cli_of(controller)(
        "agent", "rollout", "start", "0.2.5", "--selector", "site=plant", "--waves", "100%",
        "--allow-downgrade", "--json",
    )  # fmt: skip
    assert started.exit_code == 0, started.output
    rid = json.loads(started.stdout)["id"]
    out = poll(lambda: finished(api, rid), TIMEOUT, "the downgrade to finish")
    assert out["state"] == "succeeded", out
    assert out["allow_downgrade"] is True
    for agent in gateways.agents.values():
        assert agent.agent_version == "0.2.5"
        assert agent.orders[-1].allow_downgrade is True
        assert b'"allow_downgrade":true' in next(r for r in agent.raw if b'"agent"' in r)


def test_agent_update_events_are_stored(api: httpx.Client, gateways: Gateways) -> None:
    agent = gateways.add("gw-ev")
    enrol(api, gateways, {"gw-ev": {"site": "plant"}})
    poll(  # its last report is stored: none comes after the event
        lambda: (
            (d := api.get("/api/v1/devices/gw-ev").json())["observed_generation"]
            == d["desired_generation"]
        ),
        TIMEOUT,
        "the device's last report stored",
    )
    update = AgentUpdateStatus(
        version="0.3.0", phase="downloading", previous="0.2.0", at=datetime.now(timezone.utc)
    )
    agent.send_event(update)

    def stored() -> dict[str, Any] | None:
        answer = api.get("/api/v1/devices/gw-ev").json()
        return answer if answer.get("agent_update") else None

    device = poll(stored, TIMEOUT, "the agent_update event stored")
    assert device["agent_update"]["phase"] == "downloading"
    assert device["agent_update"]["version"] == "0.3.0"
