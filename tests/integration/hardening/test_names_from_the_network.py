"""Names from the network never become paths: ``../`` forms, absolute paths, NUL bytes and
over-long names are refused with 4xx by the controller's API and by the agent before it touches
its disk. Against a real controller, the real Mosquitto and the real agent daemon."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.settings import AgentSettings
from controller.demo.sample_models import classifier
from controller.server import Controller
from shared.codec import encode
from shared.messages import ArtifactRef, DesiredState, ModelSlot
from shared.topics import Channel, Topics
from tests.integration.hardening.conftest import open_controller
from tests.integration.hardening.watcher import ReportedWatcher
from tests.integration.tls.agent_runner import RunningAgent, poll
from tests.ports import free_port

SHA = "ab" * 32

BAD_NAMES = [
    "%2E%2E",
    "%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
    "..%5C..%5Cwindows",
    "%2Fetc%2Fpasswd",
    "x%00",
    "x%0A",
    "a" * 65,
    "a" * 5000,
]
"""URL-encoded path segments: the server decodes them to ``..``, ``../../etc/passwd``, ``/etc``,
a NUL byte, a newline and names past the 64-character limit."""

BAD_KEYS = [*BAD_NAMES, SHA.upper(), SHA + "0", SHA[:-1] + "%00", f"{SHA[:-2]}%2F0"]
"""Engine keys and artifact ids: also upper case, one digit too many, NUL, a slash."""


@pytest.fixture
def controller(mosquitto: str, tmp_path: Path) -> Iterator[Controller]:
    with open_controller(mosquitto, tmp_path, f"names-{uuid.uuid4().hex[:10]}/v1") as c:
        yield c


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def is_client_error(response: httpx.Response) -> bool:
    return 400 <= response.status_code < 500


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_model_uploads_under_bad_names_or_versions_are_refused_and_store_nothing(
    controller: Controller, api: httpx.Client, bad: str
) -> None:
    data_dir = controller.settings.data_dir
    before = tree(data_dir / "artifacts")
    model = classifier(seed=5)
    for path in (f"/api/v1/models/{bad}/versions/1", f"/api/v1/models/ok/versions/{bad}"):
        response = api.put(path, content=model)
        assert is_client_error(response), (path, response.status_code, response.text)
        assert is_client_error(api.get(path))
    assert api.get("/api/v1/models").json() == []
    assert tree(data_dir / "artifacts") == before
    assert not (data_dir.parent / "etc").exists()


@pytest.mark.parametrize("bad", BAD_KEYS)
def test_artifact_and_engine_requests_with_bad_ids_are_refused(api: httpx.Client, bad: str) -> None:
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", f"/api/v1/artifacts/{bad}", {}),
        ("HEAD", f"/api/v1/artifacts/{bad}", {}),
        ("GET", f"/api/v1/engines/{bad}", {}),
        ("POST", f"/api/v1/engines/{bad}/lease", {"json": {"device_id": "gw-1"}}),
        ("DELETE", f"/api/v1/engines/{bad}/lease", {"params": {"device_id": "gw-1"}}),
    ]
    for method, path, extra in requests:
        response = api.request(method, path, **extra)
        assert is_client_error(response), (method, path, response.status_code)


def test_an_artifact_upload_claiming_a_bad_sha256_is_refused_and_not_stored(
    controller: Controller, api: httpx.Client
) -> None:
    before = tree(controller.settings.data_dir / "artifacts")
    for claimed in ("../../etc/passwd", "/etc/passwd", "a\x00", "f" * 65):
        response = api.post("/api/v1/artifacts", params={"sha256": claimed}, content=b"bytes")
        assert response.status_code == 400, response.text
    assert tree(controller.settings.data_dir / "artifacts") == before


def bad_desired(device: str, generation: int, **slot: Any) -> bytes:
    """A desired document whose slot has one field forced to ``slot``'s value (bypassing the
    model's validation, as a hostile or broken publisher would)."""
    good = DesiredState(
        device_id=device,
        generation=generation,
        issued_at=datetime.now(timezone.utc),
        slots=(
            ModelSlot(
                name="classifier",
                version="1",
                artifact=ArtifactRef(url="http://127.0.0.1:9/x", sha256=SHA, size=10),
            ),
        ),
    )
    document = json.loads(encode(good))
    for key, value in slot.items():
        if key == "sha256":
            document["slots"][0]["artifact"]["sha256"] = value
        elif key == "calibration_cache_sha256":
            document["slots"][0].setdefault("delegate", {})[key] = value
        else:
            document["slots"][0][key] = value
    return json.dumps(document).encode()


HOSTILE_SLOTS: list[dict[str, str]] = [
    {"sha256": "../../../../tmp/owned"},
    {"sha256": "/etc/passwd"},
    {"sha256": SHA[:-1] + "\x00"},
    {"sha256": SHA + "\n"},
    {"sha256": "a" * 4096},
    {"name": "../classifier"},
    {"name": "/abs"},
    {"name": "cls\x00"},
    {"name": "c" * 65},
    {"version": "../../1"},
    {"version": "1/../../x"},
    {"version": "1\x00"},
    {"calibration_cache_sha256": "../calib"},
]


def test_the_agent_refuses_hostile_names_in_desired_documents_before_touching_disk(
    mosquitto: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agent.link.mqtt_link")
    topics = Topics(f"names-{uuid.uuid4().hex[:10]}/v1")
    device = f"gw-names-{uuid.uuid4().hex[:6]}"
    state_dir = tmp_path / "agent"
    watcher = ReportedWatcher(mosquitto, topics, device)
    desired_topic = topics.device(device, Channel.DESIRED)
    agent = RunningAgent(
        AgentSettings(
            device_id=device,
            broker_url=mosquitto,
            state_dir=state_dir,
            serve_address=f"127.0.0.1:{free_port()}",
            topic_prefix=topics.prefix,
            runtime="onnxruntime",
        )
    )
    try:
        poll(lambda: watcher.observed() == -1, "the agent's first reported state")
        before = {d: tree(state_dir / d) for d in ("downloads", "models", "engines")}
        for hostile in HOSTILE_SLOTS:
            watcher.publish(desired_topic, bad_desired(device, 9, **hostile))
        poll(
            lambda: (
                sum("ignored malformed desired" in r.getMessage() for r in caplog.records)
                == len(HOSTILE_SLOTS)
            ),
            "every hostile document ignored",
        )
        assert {d: tree(state_dir / d) for d in before} == before
        assert not (tmp_path / "tmp").exists()
        assert not Path("/tmp/owned").exists()

        # Had any generation 9 been applied, the agent would now ignore the older generation 3.
        clean = DesiredState(
            device_id=device, generation=3, issued_at=datetime.now(timezone.utc), slots=()
        )
        watcher.publish(desired_topic, encode(clean))
        poll(lambda: watcher.observed() == 3, "generation 3 applied")
    finally:
        agent.stop()
        for channel in (Channel.DESIRED, Channel.REPORTED, Channel.STATUS):
            watcher.publish(topics.device(device, channel), b"")
        watcher.close()
