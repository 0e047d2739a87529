"""Fixtures of the agent self-update tests: the artifact server and release archives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.messages import ArtifactRef
from tests.agent_releases import make_release_archive
from tests.integration.agent.artifact_server import ArtifactServer


@pytest.fixture
def artifact_server() -> Iterator[ArtifactServer]:
    server = ArtifactServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def release(artifact_server: ArtifactServer, tmp_path: Path):  # type: ignore[no-untyped-def]
    """``release(version, broken=False)``: the reference of that release's tar.gz, served."""

    def make(version: str, broken: bool = False) -> ArtifactRef:
        data = make_release_archive(tmp_path / "releases-src", version, broken)
        suffix = "-broken" if broken else ""
        return artifact_server.add(f"jetfleet-agent-{version}{suffix}.tar.gz", data)

    return make
