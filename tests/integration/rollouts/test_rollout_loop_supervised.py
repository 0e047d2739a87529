"""The rollout loop keeps running rollouts after an unexpected error: the next tick still
advances the rollout to the end. A real controller (SQLite, real Mosquitto) with simulated
agents; its own loop is stopped and one whose rollout table raises once runs in its place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.db.rollout_store import RolloutStore
from controller.db.session import make_engine
from controller.rollouts.loop import RolloutLoop
from controller.settings import Settings
from tests.integration.controller.conftest import api_client
from tests.integration.rollouts.conftest import Fleet, poll, prepare, start_controller


class RolloutTableFailingOnce(RolloutStore):
    """The rollouts table; the first look for rollouts to run raises an unexpected error."""

    failed = False

    def to_run(self) -> list[str]:
        if not self.failed:
            self.failed = True
            raise RuntimeError("injected: the rollouts could not be listed")
        return super().to_run()


def test_a_rollout_still_finishes_after_the_loop_crashed(
    sqlite_url: str, settings_for: Callable[[str], Settings], sim_fleet: Fleet
) -> None:
    settings = settings_for(sqlite_url)
    controller = start_controller(settings)
    api = api_client(controller, timeout=30)
    engine = make_engine(settings.db_url)
    services = controller.services
    assert services is not None
    assert controller.rollout_loop is not None
    loop = RolloutLoop(RolloutTableFailingOnce(engine), services.repo, services.fleet)
    try:
        prepare(api, sim_fleet, 3, set())
        controller.rollout_loop.stop()  # gives the lease up
        body = {
            "model": "detector",
            "version": "2.0.0",
            "targets": {"selector": "site=plant"},
            "strategy": {"waves": "1,100%", "device_timeout_s": 60},
        }
        created = api.post("/api/v1/rollouts", json=body)
        assert created.status_code == 201, created.text
        rid = created.json()["id"]
        loop.start()

        def finished() -> dict[str, Any] | None:
            out: dict[str, Any] = api.get(f"/api/v1/rollouts/{rid}").json()
            return out if out["state"] not in ("pending", "running", "paused") else None

        out = poll(finished, 60, "the rollout to finish")
        assert out["state"] == "succeeded", out
        assert loop.restarts == 1
        assert all(a.active.get("detector") == "2.0.0" for a in sim_fleet.agents.values())
    finally:
        loop.stop()
        api.close()
        controller.stop()
        engine.dispose()
