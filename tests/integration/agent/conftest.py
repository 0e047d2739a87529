"""Fixtures of the agent integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.agent.artifact_server import ArtifactServer


@pytest.fixture
def artifact_server() -> Iterator[ArtifactServer]:
    """A real HTTP server with Range support on a free port, stopped after the test."""
    server = ArtifactServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
