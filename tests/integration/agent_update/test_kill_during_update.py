"""``kill -9`` at every point of an update: the device ends on one complete release, serving.

For each step the agent stops there once (``JETFLEET_TEST_UPDATE_PAUSE_AT``,
tests/agent_pause/), the test SIGKILLs it, and the stand-in for systemd's
Restart=on-failure (gateway.py) starts the launcher again on the same state directory. Whatever
the step, the update then completes: ``current`` names a complete release (0.3.0), no partial
tree is left, nothing is pending, and the agent that serves reports 0.3.0.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from shared.messages import ArtifactRef
from tests.agent_pause import UPDATE_MARKER
from tests.integration.agent.artifact_server import ArtifactServer
from tests.integration.agent_update.gateway import FACTORY_VERSION, Gateway, order_for
from tests.ports import free_port

STEPS = ["update:download", "update:unpack", "update:switch", "update:restart", "update:confirm"]


@pytest.mark.parametrize("step", STEPS)
def test_kill_at_each_update_step_ends_on_one_complete_release(
    step: str,
    mosquitto: str,
    tmp_path: Path,
    artifact_server: ArtifactServer,
    release: Callable[..., ArtifactRef],
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    gateway = Gateway(mosquitto, state, free_port(), pause_at=step)
    try:
        gateway.publish(None)
        gateway.wait_serving(FACTORY_VERSION)
        ref = release("0.3.0")
        gateway.publish(order_for(ref.url, ref.sha256, ref.size, "0.3.0"))
        gateway.wait(f"the agent paused at {step}", (state / UPDATE_MARKER).exists)
        assert (state / UPDATE_MARKER).read_text() == step
        starts = gateway.supervisor.starts
        gateway.supervisor.kill_agent()
        gateway.wait("the launcher started again", lambda: gateway.supervisor.starts > starts)
        gateway.wait("the update confirmed", lambda: gateway.phase() == "confirmed", timeout=90)
        gateway.wait_serving("0.3.0")
        assert gateway.current() == "0.3.0"
        trees = sorted(p.name for p in (gateway.releases / "trees").iterdir())
        assert trees == ["0.3.0"], trees  # no partial tree; the factory release was previous
        assert (gateway.releases / "trees" / "0.3.0" / "release.json").is_file()
        assert not (gateway.releases / "pending").exists()
        assert not (gateway.releases / "rolled-back").exists()
        if step == "update:download":  # the restarted agent resumed the partial download
            assert any(
                r.range for r in artifact_server.requests if r.path == urlsplit(ref.url).path
            )
    finally:
        gateway.close()
