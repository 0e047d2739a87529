"""A desired document that arrives while the state directory is full does not stop the agent
(found by the 30-minute soak: a redeploy during its full-disk fault, now that outages
overlap other faults, ended the agent with ENOSPC from saving ``desired.json``; no agent served
on that gateway for the rest of the run). The agent acts on the document from memory, keeps
serving what it has, and writes the document and deploys the new version once there is space.

The state directory is a real tmpfs (root, as the soak and CI run), filled to its last byte.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.slots.state_store import DESIRED_FILE, load_desired
from bench.soak.disk import fill_to_last_byte
from controller.demo.sample_models import classifier
from shared.messages import ReportedState, SlotPhase, Status
from shared.topics import Topics
from tests.agent_runner import RunningAgent
from tests.integration.agent.artifact_server import ArtifactServer
from tests.integration.agent.test_agent_mqtt import (  # noqa: F401
    Observer,
    _clean_env,
    desired,
    infer,
    observer,
    settings_for,
    slot_is,
    topics,
)


@pytest.fixture
def small_state_dir(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.fail("this test mounts a tmpfs: run it as root (as CI does)", pytrace=False)
    path = tmp_path / "state"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_deploy_while_the_state_directory_is_full_waits_for_space_instead_of_stopping_the_agent(
    mosquitto: str,
    topics: Topics,  # noqa: F811
    observer: Observer,  # noqa: F811
    artifact_server: ArtifactServer,
    small_state_dir: Path,
) -> None:
    v1 = artifact_server.add("v1.onnx", classifier(seed=1))
    v2 = artifact_server.add("v2.onnx", classifier(seed=2))
    agent = RunningAgent(settings_for(mosquitto, topics, small_state_dir))
    try:
        observer.publish_desired(desired(1, "1", v1))
        serving = observer.wait_for(ReportedState, slot_is(SlotPhase.SERVING, "1"), "v1 serving")
        assert serving.serve_url is not None
        filler = fill_to_last_byte(small_state_dir / "filler")

        observer.publish_desired(desired(2, "2", v2))
        observer.wait_for(
            ReportedState, lambda r: r.observed_generation == 2, "generation 2 observed"
        )
        assert agent.thread.is_alive(), f"the agent stopped: {agent.error!r}"
        assert infer(serving.serve_url)["model_version"] == "1"
        assert load_desired(small_state_dir).generation == 1  # type: ignore[union-attr]

        filler.unlink()
        observer.wait_for(ReportedState, slot_is(SlotPhase.SERVING, "2"), "v2 serving", 90)
        assert infer(serving.serve_url)["model_version"] == "2"
        assert load_desired(small_state_dir).generation == 2  # type: ignore[union-attr]
        assert not list(small_state_dir.glob(f".{DESIRED_FILE}.tmp"))
    finally:
        agent.stop()
    observer.wait_for(Status, lambda s: s.state == "offline", "status offline after stop")
