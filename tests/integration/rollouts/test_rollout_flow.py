"""Rollouts against the real Mosquitto with 30 simulated agents: abort at the failure threshold
with rollback, operator operations, and a controller restarted mid-wave."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from controller.cli.main import cli
from controller.rollouts import loop as rollout_loop
from controller.settings import Settings
from tests.integration.controller.conftest import admin_token, api_client
from tests.integration.rollouts.conftest import Fleet, poll, prepare, start_controller

FAILING = {"gw-03", "gw-11", "gw-17"}


def rollout(api: httpx.Client, rollout_id: str) -> dict[str, Any]:
    r = api.get(f"/api/v1/rollouts/{rollout_id}")
    assert r.status_code == 200, r.text
    return dict(r.json())


def finished(api: httpx.Client, rollout_id: str) -> dict[str, Any] | None:
    out = rollout(api, rollout_id)
    return out if out["state"] not in ("pending", "running", "paused") else None


def test_three_failures_abort_at_threshold_and_roll_back(
    db_url: str, settings_for: Callable[[str], Settings], sim_fleet: Fleet
) -> None:
    controller = start_controller(settings_for(db_url))
    api = api_client(controller, timeout=30)
    try:
        prepare(api, sim_fleet, 30, FAILING)
        body = {
            "model": "detector",
            "version": "2.0.0",
            "targets": {"selector": "site in (plant, lab)"},
            "strategy": {"waves": "1,10%,50%,100%", "device_timeout_s": 30, "canary": ["gw-00"]},
            "policy": {"max_failures": 3},
            "actor": "alice",
        }
        created = api.post("/api/v1/rollouts", json=body)
        assert created.status_code == 201, created.text
        rid = created.json()["id"]
        assert [w["devices"] for w in created.json()["waves"]] == [1, 2, 12, 15]

        # one active rollout per device: a second one is refused naming the first
        single = {**body, "targets": {"devices": ["gw-05"]}, "strategy": {"waves": "100%"}}
        clash = api.post("/api/v1/rollouts", json=single)
        assert clash.status_code == 409
        assert f"rollout {rid} holds gw-05" in clash.json()["detail"]

        out = poll(lambda: finished(api, rid), 60, "the rollout to finish")
        assert out["state"] == "rolled_back", out
        assert "3 device(s) failed (abort at 3)" in out["reason"]
        by_device = {t["device_id"]: t for t in out["targets"]}
        assert {d for d, t in by_device.items() if t["status"] == "failed"} == FAILING
        assert "validation failed: engine for detector:2.0.0" in by_device["gw-03"]["reason"]
        updated = [t for t in out["targets"] if t["generation"] is not None]
        assert all(t["status"] in ("rolled_back", "failed") for t in updated)
        assert all(t["previous_version"] == "1.0.0" for t in updated)
        assert {t["status"] for t in out["targets"]} <= {"rolled_back", "failed", "skipped"}

        # the agents and the database agree: every device is back on 1.0.0
        poll(
            lambda: (
                all(a.active.get("detector") == "1.0.0" for a in sim_fleet.agents.values())
                and not any(a.failures for a in sim_fleet.agents.values())
            ),
            30,
            "every agent back on 1.0.0",
        )
        devices = api.get("/api/v1/devices").json()
        assert {d["desired"][0]["version"] for d in devices} == {"1.0.0"}
        poll(
            lambda: all(
                d["observed_generation"] == d["desired_generation"]
                for d in api.get("/api/v1/devices").json()
            ),
            30,
            "every device at its desired generation",
        )
        audit = api.get(f"/api/v1/rollouts/{rid}/audit").json()
        # the token's name, not what the body claims ("alice")
        assert audit[0]["actor"] == "tests-admin"
        assert ("running", "rolled_back") in {(e["from_state"], e["to_state"]) for e in audit}
        # the devices are free again
        again = api.post("/api/v1/rollouts", json=single)
        assert again.status_code == 201, again.text
    finally:
        api.close()
        controller.stop()


def test_controller_restarted_mid_wave_completes_the_rollout(
    sqlite_url: str,
    settings_for: Callable[[str], Settings],
    sim_fleet: Fleet,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Waves of 15 devices go out 4 at a time (``START_CHUNK``), as a 5,000-device wave goes out
    500 at a time: a restart between chunks leaves the rest for the next tick to publish."""
    monkeypatch.setattr(rollout_loop, "START_CHUNK", 4)
    settings = settings_for(sqlite_url)
    controller = start_controller(settings)
    api = api_client(controller, timeout=30)
    try:
        prepare(api, sim_fleet, 30, set())
        body = {
            "model": "detector",
            "version": "2.0.0",
            "targets": {"selector": "site=plant"},
            "strategy": {"waves": "1,50%,100%", "device_timeout_s": 60, "soak_s": 1.0},
        }
        rid = api.post("/api/v1/rollouts", json=body).json()["id"]
        poll(lambda: rollout(api, rid)["current_wave"] >= 2, 30, "the second wave to start")
    finally:
        api.close()
        controller.stop()
    assert rollout_in_db_is_active(settings, rid)
    controller = start_controller(settings)
    try:
        api = api_client(controller, timeout=30)
        out = poll(lambda: finished(api, rid), 60, "the rollout to finish after the restart")
        assert out["state"] == "succeeded", out
        assert {t["status"] for t in out["targets"]} == {"succeeded"}
        assert all(a.active.get("detector") == "2.0.0" for a in sim_fleet.agents.values())
        devices = api.get("/api/v1/devices").json()
        assert all(d["observed_generation"] == d["desired_generation"] for d in devices)

        # operations through the CLI: rollback of the finished rollout, then a refusal
        url = controller.http_url
        runner = CliRunner(env={"JETFLEET_TOKEN": admin_token(controller)})
        result = runner.invoke(cli, ["rollouts", "rollback", rid, "--url", url])
        assert result.exit_code == 0, result.output
        assert "rolled_back" in result.output
        poll(
            lambda: all(a.active.get("detector") == "1.0.0" for a in sim_fleet.agents.values()),
            30,
            "every agent back on 1.0.0",
        )
        refused = runner.invoke(cli, ["rollouts", "pause", rid, "--url", url])
        assert refused.exit_code == 1
        assert "cannot pause rollout" in refused.output
        listed = runner.invoke(cli, ["rollouts", "ls", "--url", url])
        assert rid in listed.output
        shown = runner.invoke(cli, ["rollouts", "watch", rid, "--once", "--url", url])
        assert "gw-29" in shown.output
    finally:
        api.close()
        controller.stop()


def rollout_in_db_is_active(settings: Settings, rid: str) -> bool:
    from controller.db.rollout_store import RolloutStore
    from controller.db.session import make_engine

    engine = make_engine(settings.db_url)
    try:
        return RolloutStore(engine).get(rid).state.active
    finally:
        engine.dispose()
