"""The controller fixtures (real Mosquitto, SQLite/PostgreSQL, uvicorn) and a fleet of
simulated gateways that take agent release orders."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.topics import Topics
from tests.integration.agent_releases.sim_updaters import Outcome, UpdatingAgent
from tests.integration.controller.conftest import (  # noqa: F401
    api,
    controller,
    data_dir,
    db_api,
    db_controller,
    prefix,
)


class Gateways:
    """Simulated gateways on the test's topic prefix, all stopped after the test."""

    def __init__(self, broker: str, topic_prefix: str) -> None:
        self.broker = broker
        self.topics = Topics(topic_prefix)
        self.agents: dict[str, UpdatingAgent] = {}

    def add(
        self,
        device_id: str,
        agent_version: str = "0.2.0",
        arch: str = "x86_64",
        outcome: Outcome = "confirm",
    ) -> UpdatingAgent:
        agent = UpdatingAgent(
            self.broker,
            self.topics,
            device_id,
            {"site": "plant"},
            agent_version=agent_version,
            arch=arch,
            outcome=outcome,
        )
        self.agents[device_id] = agent
        agent.start()
        return agent

    def stop(self) -> None:
        for agent in self.agents.values():
            agent.stop()


@pytest.fixture
def gateways(mosquitto: str, prefix: str) -> Iterator[Gateways]:  # noqa: F811
    fleet = Gateways(mosquitto, prefix)
    yield fleet
    fleet.stop()
