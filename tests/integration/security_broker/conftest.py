"""A controller whose broker enforces per-device credentials and ACLs: a real Mosquitto with
the generated dynamic security configuration, or the embedded broker; real HTTP, real SQLite."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from controller.cli.main import cli
from controller.server import Controller
from controller.settings import Settings
from shared.topics import Channel, Topics
from shared.transport import MqttAuth
from tests.integration.controller.conftest import start_controller
from tests.integration.security_broker.acl_broker import AclMosquitto, Peer


@dataclass
class Secured:
    """The controller, its broker and the credentials a test needs."""

    controller: Controller
    broker_url: str
    controller_user: str
    controller_password: str
    admin_token: str
    topics: Topics
    api: httpx.Client

    def enrol(self, device_id: str, *, bound: bool = False, **token_body: Any) -> dict[str, Any]:
        """Create an enrolment token as admin and exchange it, like an agent does; ``bound``
        makes the token for this device only (re-enrolling an enrolled device needs that)."""
        if bound:
            token_body = {**token_body, "device_id": device_id}
        created = self.api.post("/api/v1/enrol-tokens", json=token_body)
        assert created.status_code == 201, created.text
        answer = self.api.post(
            "/api/v1/enroll", json={"token": created.json()["token"], "device_id": device_id}
        )
        assert answer.status_code == 200, answer.text
        identity: dict[str, Any] = answer.json()
        return identity

    def topic(self, device_id: str, channel: Channel) -> str:
        return self.topics.device(device_id, channel)


@pytest.fixture
def prefix() -> str:
    return f"jfsec/{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=["mosquitto", "embedded"])
def secured(
    request: pytest.FixtureRequest, mosquitto: str, tmp_path: Path, prefix: str
) -> Iterator[Secured]:
    """Each test runs against Mosquitto + dynamic security and against the embedded broker."""
    broker: AclMosquitto | None = None
    if request.param == "mosquitto":
        broker = AclMosquitto(tmp_path / "mosquitto", prefix).start()
        user, password = broker.controller_user, broker.controller_password
        settings = Settings(
            db_url=f"sqlite:///{tmp_path}/jetfleet.db",
            broker_url=broker.url,
            data_dir=tmp_path / "data",
            http_port=0,
            topic_prefix=prefix,
            auto_migrate=True,
            broker_admin="dynsec",
            broker_auth=MqttAuth(user, password),
        )
    else:
        user, password = "jetfleet-controller", uuid.uuid4().hex
        settings = Settings(
            db_url=f"sqlite:///{tmp_path}/jetfleet.db",
            broker_url=None,
            data_dir=tmp_path / "data",
            http_port=0,
            embedded_broker_port=0,
            topic_prefix=prefix,
            auto_migrate=True,
            broker_admin="embedded",
            broker_auth=MqttAuth(user, password),
        )
    try:
        controller = start_controller(settings)
        try:
            admin = (settings.data_dir / "admin-token").read_text().strip()
            with httpx.Client(
                base_url=controller.http_url,
                timeout=30,
                headers={"Authorization": f"Bearer {admin}"},
            ) as api:
                yield Secured(
                    controller,
                    controller.broker_url,
                    user,
                    password,
                    admin,
                    Topics(prefix),
                    api,
                )
        finally:
            controller.stop()
    finally:
        if broker is not None:
            broker.stop()


@pytest.fixture
def peer(secured: Secured) -> Iterator[Callable[..., Peer]]:
    """Factory of MQTT peers on the secured broker, all closed after the test:
    ``peer(username, password, client_id=None, clean_session=True)``."""
    made: list[Peer] = []

    def make(
        username: str | None,
        password: str | None,
        client_id: str | None = None,
        clean_session: bool = True,
    ) -> Peer:
        p = Peer(secured.broker_url, username, password, client_id, clean_session)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def serve_error(tmp_path: Path, *options: str) -> str:
    """``jetfleet serve`` with ``options`` must stop with exit code 1, one ``Error`` line and no
    traceback; that line."""
    result = CliRunner().invoke(
        cli,
        [
            "serve",
            "--http",
            "127.0.0.1:0",
            "--embedded-broker",
            "127.0.0.1:0",
            "--data-dir",
            str(tmp_path / "data"),
            "--auto-migrate",
            *options,
        ],
    )
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.strip().splitlines() if line.startswith("Error")]
    assert len(lines) == 1, result.output
    return lines[0]
