"""A real controller (SQLite or PostgreSQL, real Mosquitto) and a fleet of simulated agents."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from controller.demo import sample_models
from controller.server import Controller
from controller.settings import Settings
from shared.topics import Topics
from tests.integration.controller.conftest import poll, set_labels, start_controller
from tests.integration.rollouts.sim_agents import SimAgent


class Fleet:
    """Simulated agents on one prefix, all stopped after the test."""

    def __init__(self, broker: str, prefix: str) -> None:
        self.broker = broker
        self.topics = Topics(prefix)
        self.agents: dict[str, SimAgent] = {}

    def start(self, n: int, fail: set[str] = frozenset(), bad_version: str = "2.0.0") -> None:
        for i in range(n):
            device_id = f"gw-{i:02d}"
            agent = SimAgent(
                self.broker,
                self.topics,
                device_id,
                {"site": "plant", "line": str(i % 3)},
                fail_versions={bad_version} if device_id in fail else (),
            )
            self.agents[device_id] = agent.start()

    def stop(self) -> None:
        for agent in self.agents.values():
            agent.stop()


@pytest.fixture
def settings_for(mosquitto: str, tmp_path: Path) -> Callable[[str], Settings]:
    prefix = f"jftest/{uuid.uuid4().hex[:10]}"

    def make(db_url: str) -> Settings:
        return Settings(
            db_url=db_url,
            broker_url=mosquitto,
            data_dir=tmp_path / "data",
            http_port=0,
            topic_prefix=prefix,
            auto_migrate=True,
        )

    return make


@pytest.fixture
def sim_fleet(mosquitto: str, settings_for: Callable[[str], Settings]) -> Iterator[Fleet]:
    fleet = Fleet(mosquitto, settings_for("sqlite://").topic_prefix)
    yield fleet
    fleet.stop()


def prepare(api: httpx.Client, fleet: Fleet, n: int, fail: set[str]) -> None:
    """Start ``n`` agents, label them as the operator would (their own labels are ignored),
    push detector 1.0.0 and 2.0.0, serve 1.0.0 everywhere."""
    fleet.start(n, fail)
    poll(lambda: len(api.get("/api/v1/devices").json()) == n, 30, f"{n} devices enrolled")
    for device_id, agent in fleet.agents.items():
        set_labels(api, device_id, agent.labels)
    for version, seed in (("1.0.0", 1), ("2.0.0", 2)):
        r = api.put(
            f"/api/v1/models/detector/versions/{version}",
            content=sample_models.classifier(seed=seed),
        )
        assert r.status_code == 201, r.text
    r = api.post(
        "/api/v1/deployments",
        json={"model": "detector", "version": "1.0.0", "selector": "site=plant"},
    )
    assert r.status_code == 200, r.text
    poll(
        lambda: all(a.active.get("detector") == "1.0.0" for a in fleet.agents.values()),
        30,
        "every agent serving 1.0.0",
    )


__all__ = ["Controller", "Fleet", "poll", "prepare", "start_controller"]
