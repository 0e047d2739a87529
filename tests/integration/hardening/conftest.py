"""The hardening tests' controller: SQLite, the test Mosquitto, no API tokens, one limit set."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller.server import Controller
from controller.settings import Settings
from tests.integration.controller.conftest import start_controller


@contextmanager
def open_controller(
    mosquitto: str, tmp_path: Path, prefix: str, **settings: Any
) -> Iterator[Controller]:
    """A serving controller on ``prefix`` with ``settings`` (the limit under test) on top."""
    controller = start_controller(
        Settings(
            db_url=f"sqlite:///{tmp_path}/jetfleet.db",
            broker_url=mosquitto,
            data_dir=tmp_path / "data",
            http_port=0,
            topic_prefix=prefix,
            auto_migrate=True,
            auth_required=False,
            **settings,
        )
    )
    try:
        yield controller
    finally:
        controller.stop()


@pytest.fixture
def api(controller: Controller) -> Iterator[httpx.Client]:
    """The controller's API (tokens are off in these tests)."""
    with httpx.Client(base_url=controller.http_url, timeout=30) as client:
        yield client
