"""``jetfleet serve``'s broker admin: the secure default, and one-line refusals of settings that
cannot work."""

from __future__ import annotations

from pathlib import Path

import httpx
from click.testing import CliRunner

from controller.broker_admin.base import choose_admin
from controller.cli.main import cli
from controller.settings import Settings
from tests.integration.controller.conftest import start_controller
from tests.integration.security_broker.acl_broker import REFUSED_LOGIN, Peer


def _serve_error(tmp_path: Path, *options: str) -> str:
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


def test_dynsec_needs_mosquitto_and_the_controllers_user(tmp_path: Path) -> None:
    line = _serve_error(tmp_path, "--broker-admin", "dynsec")
    assert "--broker-admin dynsec needs an external Mosquitto: give --broker" in line
    line = _serve_error(tmp_path, "--broker-admin", "dynsec", "--broker", "mqtt://127.0.0.1:1")
    assert "needs the controller's broker user: give --broker-user" in line


def test_embedded_admin_is_for_the_embedded_broker(tmp_path: Path) -> None:
    line = _serve_error(tmp_path, "--broker-admin", "embedded", "--broker", "mqtt://127.0.0.1:1")
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
