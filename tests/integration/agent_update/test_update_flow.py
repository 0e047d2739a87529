"""The agent updates itself end to end: real launcher, real agent processes, real broker.

The factory release is this checkout's agent (version 0.2.0, the dev venv's ``jetfleet-agent``);
the new release is the same code reporting 0.3.0 (tests/agent_releases.py). See gateway.py for
the stand-in of systemd's Restart=on-failure.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from controller.demo.sample_models import classifier
from shared.messages import ArtifactRef, ModelSlot
from tests.integration.agent.artifact_server import ArtifactServer
from tests.integration.agent_update.gateway import FACTORY_VERSION, Gateway, order_for
from tests.ports import free_port

BODY = {"inputs": [{"name": "image", "shape": [1, 3, 32, 32], "datatype": "FP32",
                    "data": [0.5] * 3072}]}  # fmt: skip


@pytest.fixture
def gateway(mosquitto: str, tmp_path: Path) -> Iterator[Gateway]:
    state = tmp_path / "state"
    state.mkdir()
    gw = Gateway(mosquitto, state, free_port())
    try:
        yield gw
    finally:
        gw.close()


def test_update_confirms_and_models_serve_across_the_restart(
    gateway: Gateway, artifact_server: ArtifactServer, release: Callable[..., ArtifactRef]
) -> None:
    model = artifact_server.add("classifier.onnx", classifier(seed=1))
    slot = ModelSlot(name="classifier", version="1", artifact=model)
    gateway.publish(None, (slot,))
    infer = f"{gateway.url}/v2/models/classifier/infer"
    gateway.wait(
        "the classifier serving",
        lambda: _answers(infer),
    )
    load = Load(infer)
    ref = release("0.3.0")
    gateway.publish(order_for(ref.url, ref.sha256, ref.size, "0.3.0"), (slot,))
    gateway.wait_serving("0.3.0")
    gateway.wait("the update confirmed", lambda: gateway.phase() == "confirmed")
    load.stop()
    print(f"requests across the restart: {load.ok} ok, failed: {load.failed}")
    assert load.ok > 0
    # No connection is refused: the socket listens throughout. One client sending one request
    # at a time can lose at most the request it sent on a connection the old server accepted
    # but had not read when it shut down (uvicorn closes such idle connections).
    assert not [f for f in load.failed if "ConnectError" in f], load.failed
    assert len(load.failed) <= 1, load.failed
    assert gateway.current() == "0.3.0"
    assert not (gateway.releases / "pending").exists()
    assert httpx.post(infer, json=BODY, timeout=30).status_code == 200
    journal = gateway.journal()
    assert journal is not None
    assert journal["previous"] == FACTORY_VERSION
    assert journal["serving_before"] == ["classifier"]
    assert gateway.supervisor.starts == 1, "the agent restarted by execv, not by exiting"
    phases = ["downloading", "verifying", "unpacking", "checking", "switching", "restarting"]
    phases += ["confirming", "confirmed"]
    gateway.wait("every phase's event", lambda: gateway.update_events == phases, timeout=10)

    def reported_confirmed() -> bool:
        reported = gateway.reported or {}
        update = reported.get("agent_update") or {}
        return reported.get("agent_version") == "0.3.0" and update.get("phase") == "confirmed"

    gateway.wait("the report of the confirmed update", reported_confirmed)


def test_broken_release_rolls_back_by_itself_and_an_older_one_is_refused(
    gateway: Gateway, release: Callable[..., ArtifactRef]
) -> None:
    gateway.publish(None)
    gateway.wait_serving(FACTORY_VERSION)
    broken = release("0.4.0", broken=True)
    gateway.publish(order_for(broken.url, broken.sha256, broken.size, "0.4.0"))
    gateway.wait("the rollback", lambda: gateway.phase() == "rolled_back", timeout=90)
    gateway.wait_serving(FACTORY_VERSION)
    journal = gateway.journal()
    assert journal is not None
    assert journal["order"]["version"] == "0.4.0"
    assert journal["previous"] == FACTORY_VERSION
    assert "did not confirm in 3 starts" in journal["error"]
    assert gateway.current() is None, "back on the packaged release"
    assert gateway.supervisor.starts == 4, "three failed starts, then the rollback"
    assert not (gateway.releases / "trees" / "0.4.0").exists(), "the failed release is pruned"

    older = release("0.1.5")
    gateway.publish(order_for(older.url, older.sha256, older.size, "0.1.5"))
    gateway.wait("the refusal", lambda: gateway.phase() == "refused")
    journal = gateway.journal()
    assert journal is not None
    assert "older than the running 0.2.0" in journal["error"]
    assert gateway.current() is None
    assert gateway.server() is not None


class Load:
    """Sends inference requests one after another, each on a new connection, until stopped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ok = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                answer = httpx.post(self.url, json=BODY, timeout=60)
            except httpx.HTTPError as exc:
                self.failed.append(repr(exc))
                continue
            if answer.status_code == 200:
                self.ok += 1
            else:
                self.failed.append(f"HTTP {answer.status_code}: {answer.text[:200]}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)


def _answers(url: str) -> bool:
    try:
        return httpx.post(url, json=BODY, timeout=30).status_code == 200
    except httpx.TransportError:
        return False
