"""``jetfleet serve``'s broker admin: the secure default, and one-line refusals of settings that
cannot work."""

from __future__ import annotations

from pathlib import Path

import httpx

from controller.broker_admin.base import choose_admin
from controller.settings import Settings
from tests.integration.controller.conftest import start_controller
from tests.integration.security_broker.acl_broker import REFUSED_LOGIN, Peer
from tests.integration.security_broker.conftest import serve_error


def test_dynsec_needs_mosquitto_and_the_controllers_user(tmp_path: Path) -> None:
    line = serve_error(tmp_path, "--broker-admin", "dynsec")
    assert "--broker-admin dynsec needs an external Mosquitto: give --broker" in line
    line = serve_error(tmp_path, "--broker-admin", "dynsec", "--broker", "mqtt://127.0.0.1:1")
    assert "needs the controller's broker user: give --broker-user" in line


def test_embedded_admin_is_for_the_embedded_broker(tmp_path: Path) -> None:
    line = serve_error(tmp_path, "--broker-admin", "embedded", "--broker", "mqtt://127.0.0.1:1")
    assert "--broker-admin embedded is for the embedded broker" in line


def test_the_default_embedded_broker_refuses_anonymous_clients_but_not_the_controller(
    tmp_path: Path,
) -> None:
    settings = Settings(
        db_url=f"sqlite:///{tmp_path}/jetfleet.db",
        broker_url=None,
        data_dir=tmp_path / "data",
        http_port=0,
        embedded_broker_port=0,
        auto_migrate=True,
        broker_admin=choose_admin("auto", external_broker=False),
    )
    controller = start_controller(settings)  # the bus logged in with a made-up password
    anonymous = Peer(controller.broker_url, None, None)
    try:
        assert str(anonymous.connect()) in REFUSED_LOGIN
        health = httpx.get(f"{controller.http_url}/healthz", timeout=10)
        assert health.status_code == 200
    finally:
        anonymous.close()
        controller.stop()
