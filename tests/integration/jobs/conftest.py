"""A real controller (in-process, SQLite, the real Mosquitto) and a real agent daemon for jobs."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import paho.mqtt.client as mqtt
import pytest
from click.testing import CliRunner, Result
from paho.mqtt.enums import CallbackAPIVersion

from agent.settings import AgentSettings
from controller.cli.main import cli
from controller.server import Controller
from controller.settings import Settings, parse_broker_url
from shared.topics import Channel, Topics
from tests.agent_runner import RunningAgent
from tests.integration.controller.conftest import (
    admin_token,
    bearer,
    new_token,
    poll,
    start_controller,
)
from tests.integration.signing.harness import active_key
from tests.ports import free_port

DEVICE = "gw-jobs"


@dataclass
class Fleet:
    """One controller, one agent, and the ways a test talks to them."""

    controller: Controller
    api: httpx.Client
    state_dir: Path
    token: str
    """An admin API token (the CLI's)."""
    agent: RunningAgent | None = None

    @property
    def url(self) -> str:
        return self.controller.http_url

    def cli(self, *args: str) -> Result:
        """``jetfleet ARGS --url <controller> --token <admin>`` in-process."""
        return CliRunner().invoke(cli, [*args, "--url", self.url, "--token", self.token])

    def device(self) -> dict[str, Any]:
        response = self.api.get(f"/api/v1/devices/{DEVICE}")
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    def push(self, name: str, version: str, data: bytes) -> dict[str, Any]:
        response = self.api.put(f"/api/v1/models/{name}/versions/{version}", content=data)
        assert response.status_code in (200, 201), response.text
        result: dict[str, Any] = response.json()
        return result

    def deploy_and_wait(self, name: str, version: str) -> None:
        body = {"model": name, "version": version, "device": DEVICE}
        response = self.api.post("/api/v1/deployments", json=body)
        assert response.status_code == 200, response.text

        def serving() -> bool:
            slots = self.device()["reported"]
            return any(
                s["name"] == name and s["phase"] == "serving" and s["active_version"] == version
                for s in slots
            )

        poll(serving, 120, f"{name}:{version} serving on {DEVICE}")

    def wait_analysed(self, name: str, version: str) -> None:
        """Until the controller's background analysis of the version has finished (the push
        answers before it; `models show` prints "analysis pending" until then)."""

        def done() -> bool:
            found = self.api.get(f"/api/v1/models/{name}/versions/{version}").json()
            return bool(found["analysis_state"] != "pending")

        poll(done, 120, f"the analysis of {name}:{version}")

    def start_agent(self) -> RunningAgent:
        self.agent = RunningAgent(
            AgentSettings(
                device_id=DEVICE,
                broker_url=self.controller.broker_url,
                state_dir=self.state_dir,
                serve_address=f"127.0.0.1:{free_port()}",
                topic_prefix=self.controller.settings.topic_prefix,
                telemetry_interval_s=5.0,
                controller_url=self.url,
                api_token=new_token(self.controller, DEVICE, "device", device_id=DEVICE),
            )
        )
        poll(lambda: self._known(), 60, f"{DEVICE} to report")
        return self.agent

    def stop_agent(self) -> None:
        if self.agent is not None:
            self.agent.stop()
            self.agent = None

    def _known(self) -> bool:
        response = self.api.get(f"/api/v1/devices/{DEVICE}")
        return response.status_code == 200 and response.json()["facts"] is not None


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.upper().startswith("JETFLEET_") and not name.upper().startswith("JETFLEET_TEST"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@contextmanager
def running_fleet(mosquitto: str, tmp: Path, prefix: str, timeout_s: float = 30) -> Iterator[Fleet]:
    """A real controller on SQLite in ``tmp`` and one real agent pinned to its fleet key, as
    enrolment pins it (the agent then refuses models without a valid signature); the retained
    documents it left on the shared broker are cleared afterwards."""
    settings = Settings(
        db_url=f"sqlite:///{tmp}/controller.db",
        broker_url=mosquitto,
        data_dir=tmp / "data",
        http_port=0,
        topic_prefix=f"{prefix}-{uuid.uuid4().hex[:10]}/v1",
        auto_migrate=True,
    )
    controller = start_controller(settings)
    token = admin_token(controller)
    api = httpx.Client(base_url=controller.http_url, timeout=timeout_s, headers=bearer(token))
    made = Fleet(controller, api, tmp / "agent", token)
    key = active_key(settings)
    made.state_dir.mkdir(parents=True)
    (made.state_dir / "identity.json").write_text(
        json.dumps(
            {"device_id": DEVICE, "fleet_key": {"key_id": key.key_id, "public_key": key.public_key}}
        )
    )
    try:
        made.start_agent()
        yield made
    finally:
        made.stop_agent()
        api.close()
        controller.stop()
        _clear_retained(mosquitto, Topics(settings.topic_prefix))


@pytest.fixture
def fleet(mosquitto: str, tmp_path: Path) -> Iterator[Fleet]:
    with running_fleet(mosquitto, tmp_path, "jobs") as made:
        yield made


def _clear_retained(broker: str, topics: Topics) -> None:
    """Remove the retained documents this test left on the shared broker."""
    host, port = parse_broker_url(broker)
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"jobs-{uuid.uuid4().hex[:8]}")
    client.connect(host, port)
    client.loop_start()
    try:
        for channel in (Channel.DESIRED, Channel.REPORTED, Channel.STATUS):
            client.publish(
                topics.device(DEVICE, channel), b"", qos=1, retain=True
            ).wait_for_publish(10)
    finally:
        client.disconnect()
        client.loop_stop()
