"""A leader that dies between storing a wave's desired documents and the broker acknowledging
them (kill -9, or the broker gone): the next leader publishes them, and the rollout completes.

Before, the successor's deploy found the documents already stored ("unchanged"), published
nothing, and the devices waited for a document that never came until the device timeout failed
them. Which instant a kill -9 lands on cannot be chosen, so the dying leader here is a rollout
loop whose broker link fails after the database commit, exactly where the kill would land.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller.db.rollout_store import RolloutStore
from controller.db.session import make_engine
from controller.errors import BusError
from controller.fleet.deployments import Fleet
from controller.rollouts.loop import RolloutLoop
from controller.settings import Settings
from shared.topics import Topics
from tests.integration.controller.conftest import api_client, poll, start_controller
from tests.integration.rollouts.conftest import Fleet as SimFleet
from tests.integration.rollouts.conftest import prepare


class DiesBeforeTheBrokerAcknowledges:
    """The dying leader's broker link: nothing it publishes reaches the broker."""

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = True) -> None:
        raise BusError(f"the leader died before the broker acknowledged {topic}")

    def publish_all(
        self, messages: Sequence[tuple[str, bytes]], *, qos: int = 1, retain: bool = True
    ) -> None:
        self.send_all(messages, qos=qos, retain=retain)()

    def send_all(
        self, messages: Sequence[tuple[str, bytes]], *, qos: int = 1, retain: bool = True
    ) -> Callable[[], None]:
        def acknowledged() -> None:
            raise BusError(
                f"the leader died before the broker acknowledged {len(messages)} messages"
            )

        return acknowledged


def rollout(api: httpx.Client, rollout_id: str) -> dict[str, Any]:
    answer = api.get(f"/api/v1/rollouts/{rollout_id}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_the_next_leader_publishes_what_the_dead_one_stored(
    postgres_url: str, mosquitto: str, tmp_path: Path
) -> None:
    prefix = f"jftest/{uuid.uuid4().hex[:10]}"
    settings = Settings(
        db_url=postgres_url,
        broker_url=mosquitto,
        data_dir=tmp_path / "data",
        http_port=0,
        topic_prefix=prefix,
        auto_migrate=True,
    )
    controller = start_controller(settings)
    services = controller.services
    assert services is not None
    assert controller.rollout_loop is not None
    controller.rollout_loop.stop()  # the surviving replica's loop, started again below
    sims = SimFleet(mosquitto, prefix)
    api = api_client(controller)
    engine = make_engine(postgres_url)
    try:
        prepare(api, sims, 4, set())
        body = {
            "model": "detector",
            "version": "2.0.0",
            "targets": {"selector": "site=plant"},
            "strategy": {"waves": "100%", "device_timeout_s": 120},
        }
        created = api.post("/api/v1/rollouts", json=body)
        assert created.status_code == 201, created.text
        rid = created.json()["id"]

        dying_fleet = Fleet(
            services.repo,
            services.catalog,
            services.configs,
            DiesBeforeTheBrokerAcknowledges(),
            Topics(prefix),
            controller.http_url,
        )
        dying = RolloutLoop(
            RolloutStore(engine), services.repo, dying_fleet, lease_ttl_s=1.0, holder="dying"
        )
        with pytest.raises(BusError):
            dying.run_once()
        stored = {d["id"]: d for d in api.get("/api/v1/devices").json()}
        assert {d["desired"][0]["version"] for d in stored.values()} == {"2.0.0"}
        assert all(a.active.get("detector") == "1.0.0" for a in sims.agents.values())

        controller.rollout_loop.start()  # takes the lease once the dead one's expires
        done = poll(
            lambda: (out := rollout(api, rid))["state"] not in ("pending", "running") and out,
            60,
            "the rollout to finish under the next leader",
        )
        assert done["state"] == "succeeded", done
        assert all(a.active.get("detector") == "2.0.0" for a in sims.agents.values())
    finally:
        api.close()
        sims.stop()
        controller.stop()
        engine.dispose()
