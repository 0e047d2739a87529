"""Fixtures of the agent integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from controller.server import Controller
from controller.settings import Settings
from tests.integration.agent.artifact_server import ArtifactServer
from tests.integration.controller.conftest import api_client


@pytest.fixture
def artifact_server() -> Iterator[ArtifactServer]:
    """A real HTTP server with Range support on a free port, stopped after the test."""
    server = ArtifactServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def controller(mosquitto: str, tmp_path: Path) -> Iterator[Controller]:
    """A real controller (SQLite, the shared Mosquitto, its own topic prefix), auth on."""
    settings = Settings(
        db_url=f"sqlite:///{tmp_path}/controller.db",
        broker_url=mosquitto,
        data_dir=tmp_path / "data",
        http_port=0,
        topic_prefix=f"jftest/{tmp_path.name[-10:]}",
        auto_migrate=True,
    )
    c = Controller(settings)
    c.start()
    try:
        c.serve_in_thread()
        yield c
    finally:
        c.stop()


@pytest.fixture
def api(controller: Controller) -> Iterator[httpx.Client]:
    """The controller's API as an admin."""
    with api_client(controller) as client:
        yield client
