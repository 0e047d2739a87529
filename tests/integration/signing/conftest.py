"""Fixtures of the signing integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.agent.artifact_server import ArtifactServer


@pytest.fixture
def artifact_server() -> Iterator[ArtifactServer]:
    """A real HTTP server on a free port (plays an attacker's artifact or engine store)."""
    server = ArtifactServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
