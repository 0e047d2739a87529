"""A real controller (real uvicorn on a free port, real broker, real database) per test."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import paho.mqtt.client as mqtt
import pytest
from click.testing import CliRunner, Result
from paho.mqtt.enums import CallbackAPIVersion

from controller.cli.main import cli
from controller.server import Controller
from controller.settings import Settings, parse_broker_url

T = TypeVar("T")


def poll(check: Callable[[], T | None], timeout_s: float = 10.0, what: str = "condition") -> T:
    """Call ``check`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def start_controller(settings: Settings) -> Controller:
    controller = Controller(settings)
    controller.start()
    try:
        controller.serve_in_thread()
    except BaseException:
        controller.stop()
        raise
    return controller


@pytest.fixture
def prefix() -> str:
    """A topic prefix no other test uses, so retained messages don't leak between tests."""
    return f"jftest/{uuid.uuid4().hex[:10]}"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def sqlite_settings(
    mosquitto: str, sqlite_url: str, data_dir: Path, prefix: str, **overrides: Any
) -> Settings:
    """Settings of a test controller on SQLite and the real Mosquitto (``overrides`` win)."""
    return Settings(
        db_url=sqlite_url,
        broker_url=mosquitto,
        data_dir=data_dir,
        http_port=0,
        topic_prefix=prefix,
        auto_migrate=True,
        **overrides,
    )


@pytest.fixture
def controller(
    mosquitto: str, sqlite_url: str, data_dir: Path, prefix: str
) -> Iterator[Controller]:
    """A controller on SQLite and the real Mosquitto."""
    c = start_controller(sqlite_settings(mosquitto, sqlite_url, data_dir, prefix))
    yield c
    c.stop()


@pytest.fixture
def db_controller(mosquitto: str, db_url: str, data_dir: Path, prefix: str) -> Iterator[Controller]:
    """A controller on each database (SQLite and PostgreSQL) and the real Mosquitto."""
    settings = Settings(
        db_url=db_url,
        broker_url=mosquitto,
        data_dir=data_dir,
        http_port=0,
        topic_prefix=prefix,
        auto_migrate=True,
    )
    c = start_controller(settings)
    yield c
    c.stop()


def admin_token(controller: Controller, name: str = "tests-admin") -> str:
    """A new admin API token of ``controller``, made by its own token service."""
    return new_token(controller, name, "admin")


def new_token(controller: Controller, name: str, role: str, device_id: str | None = None) -> str:
    """A new API token of ``role`` (``device``: bound to ``device_id``)."""
    services = controller.services
    assert services is not None, "start the controller first"
    assert services.access is not None, "this controller was wired without access control"
    return services.access.create(name, role, device_id=device_id).token


def bearer(token: str) -> dict[str, str]:
    """The ``Authorization`` header of ``token``."""
    return {"Authorization": f"Bearer {token}"}


def api_client(controller: Controller, timeout: float = 10) -> httpx.Client:
    """An HTTP client of ``controller``'s API holding a fresh admin token."""
    return httpx.Client(
        base_url=controller.http_url, timeout=timeout, headers=bearer(admin_token(controller))
    )


def set_labels(api: httpx.Client, device_id: str, labels: dict[str, str]) -> None:
    """Label a listed device as the operator does (the labels a device reports are ignored)."""
    answer = api.put(f"/api/v1/devices/{device_id}/labels", json={"labels": labels})
    assert answer.status_code == 200, answer.text


@pytest.fixture
def run(controller: Controller) -> Callable[..., Result]:
    """``jetfleet ARGS... --url <the controller>`` in-process, as an admin."""
    runner = CliRunner(env={"JETFLEET_TOKEN": admin_token(controller)})

    def invoke(*args: str) -> Result:
        return runner.invoke(cli, [*args, "--url", controller.http_url])

    return invoke


@pytest.fixture
def api(controller: Controller) -> Iterator[httpx.Client]:
    """The controller's API as an admin."""
    with api_client(controller) as client:
        yield client


@pytest.fixture
def db_api(db_controller: Controller) -> Iterator[httpx.Client]:
    with api_client(db_controller) as client:
        yield client


class MqttPeer:
    """A paho client standing in for an agent or an observer in tests."""

    def __init__(self, broker_url: str, client_id: str | None = None) -> None:
        host, port = parse_broker_url(broker_url)
        self.messages: list[mqtt.MQTTMessage] = []
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id or f"jftest-{uuid.uuid4().hex[:8]}",
            protocol=mqtt.MQTTv311,
        )
        self.client.on_message = lambda _c, _u, msg: self.messages.append(msg)
        self.host, self.port = host, port

    def connect(self) -> MqttPeer:
        self.client.connect(self.host, self.port, keepalive=30)
        self.client.loop_start()
        return self

    def subscribe(self, topic: str) -> None:
        """Subscribe and wait for the broker's SUBACK."""
        acked: set[int] = set()
        self.client.on_subscribe = lambda _c, _u, mid, _rc, _p: acked.add(mid)
        result, mid = self.client.subscribe(topic, qos=1)
        assert result == mqtt.MQTT_ERR_SUCCESS
        poll(lambda: mid in acked, what=f"SUBACK for {topic}")

    def publish(self, topic: str, payload: bytes, retain: bool = False) -> None:
        info = self.client.publish(topic, payload, qos=1, retain=retain)
        info.wait_for_publish(10)
        assert info.is_published()

    def on(self, topic: str) -> list[bytes]:
        return [bytes(m.payload) for m in list(self.messages) if m.topic == topic]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def peers() -> Iterator[Callable[[str], MqttPeer]]:
    """Factory of connected MQTT peers, all disconnected after the test."""
    made: list[MqttPeer] = []

    def make(broker_url: str) -> MqttPeer:
        peer = MqttPeer(broker_url).connect()
        made.append(peer)
        return peer

    yield make
    for peer in made:
        peer.close()
