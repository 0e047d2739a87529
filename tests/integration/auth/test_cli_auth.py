"""`jetfleet tokens`, `login` and `audit` as an operator types them, against a real controller."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from controller.cli.main import cli
from controller.server import Controller
from controller.settings import Settings
from tests.integration.controller.conftest import admin_token, new_token, start_controller


def one_line_error(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.fixture
def runner(tmp_path: Path) -> CliRunner:
    return CliRunner(env={"XDG_CONFIG_HOME": str(tmp_path / "config")})


def test_first_admin_token_from_the_database_then_login_and_work_without_flags(
    tmp_path: Path, sqlite_url: str, mosquitto: str, runner: CliRunner
) -> None:
    assert runner.invoke(cli, ["db", "upgrade", "--db", sqlite_url]).exit_code == 0
    created = runner.invoke(
        cli, ["tokens", "create", "--name", "root", "--role", "admin", "--db", sqlite_url]
    )
    assert created.exit_code == 0, created.output
    token = next(line for line in created.output.splitlines() if line.startswith("jf_"))
    assert "role admin, never expires" in created.output

    settings = Settings(
        db_url=sqlite_url,
        broker_url=mosquitto,
        data_dir=tmp_path / "data",
        http_port=0,
        auto_migrate=True,
    )
    controller = start_controller(settings)
    try:
        url = controller.http_url
        assert not (tmp_path / "data" / "admin-token").exists()  # an admin exists already

        refused = one_line_error(runner.invoke(cli, ["devices", "ls", "--url", url]))
        assert "needs an API token" in refused
        assert f"run `jetfleet login --url {url}`" in refused

        bad = one_line_error(runner.invoke(cli, ["login", "--url", url, "--token", "jf_x"]))
        assert bad.startswith("Error: not logged in: not a Jetfleet API token")
        logged = runner.invoke(cli, ["login", "--url", url, "--token", token])
        assert logged.exit_code == 0, logged.output
        assert f"logged in to {url} as root (role admin)" in logged.output
        config = tmp_path / "config" / "jetfleet" / "config.toml"
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
        assert token in config.read_text()

        listed = runner.invoke(cli, ["devices", "ls"])  # URL and token from the config file
        assert listed.exit_code == 0, listed.output
        viewer = runner.invoke(
            cli, ["tokens", "create", "--name", "wall", "--role", "viewer", "--expires", "7d"]
        )
        assert viewer.exit_code == 0, viewer.output
        viewer_token = next(line for line in viewer.output.splitlines() if line.startswith("jf_"))

        denied = one_line_error(
            runner.invoke(
                cli, ["configs", "set", "fast", "--precision", "fp16", "--token", viewer_token]
            )
        )
        assert "PUT /api/v1/configs/fast needs role operator, token 'wall' has viewer" in denied

        tokens = json.loads(runner.invoke(cli, ["tokens", "list", "--json"]).output)
        assert [(t["name"], t["role"]) for t in tokens] == [("root", "admin"), ("wall", "viewer")]
        wall = tokens[1]
        assert wall["expires_at"] is not None
        revoked = runner.invoke(cli, ["tokens", "revoke", wall["id"]])
        assert revoked.exit_code == 0, revoked.output
        gone = one_line_error(runner.invoke(cli, ["devices", "ls", "--token", viewer_token]))
        assert f"API token {wall['id']} (wall) was revoked" in gone
        table = runner.invoke(cli, ["tokens", "list"]).output
        assert "revoked" in table.splitlines()[2]

        audit = json.loads(runner.invoke(cli, ["audit", "--since", "1h", "--json"]).output)
        assert [(a["actor"], a["action"], a["status"]) for a in audit] == [
            ("root", "DELETE /api/v1/tokens/{token_id}", 200),
            ("wall", "PUT /api/v1/configs/fast", 403),
            ("root", "POST /api/v1/tokens", 201),
        ]
        mine = runner.invoke(cli, ["audit", "--actor", "wall"])
        assert mine.exit_code == 0, mine.output
        assert "PUT /api/v1/configs/fast" in mine.output
        assert "POST /api/v1/tokens" not in mine.output
    finally:
        controller.stop()
    revoked_offline = runner.invoke(cli, ["tokens", "revoke", tokens[0]["id"], "--db", sqlite_url])
    assert revoked_offline.exit_code == 0, revoked_offline.output


def test_token_options_are_checked_before_anything_is_sent(
    controller: Controller, runner: CliRunner
) -> None:
    url = controller.http_url
    admin = admin_token(controller)
    args = ["--url", url, "--token", admin]
    bad_expiry = runner.invoke(
        cli, ["tokens", "create", "--name", "x", "--role", "viewer", "--expires", "soon", *args]
    )
    assert bad_expiry.exit_code == 2
    assert "'soon' is not a duration" in bad_expiry.output
    no_device = one_line_error(
        runner.invoke(cli, ["tokens", "create", "--name", "gw", "--role", "device", *args])
    )
    assert "needs the device it speaks for" in no_device
    device = runner.invoke(
        cli,
        [
            "tokens",
            "create",
            "--name",
            "gw-9",
            "--role",
            "device",
            "--device",
            "gw-9",
            "--json",
            *args,
        ],
    )
    assert json.loads(device.output)["device_id"] == "gw-9"
    operator = new_token(controller, "otto", "operator")
    denied = one_line_error(runner.invoke(cli, ["audit", "--url", url, "--token", operator]))
    assert "GET /api/v1/audit needs role admin, token 'otto' has operator" in denied
    since = runner.invoke(cli, ["audit", "--since", "yesterday", *args])
    assert since.exit_code == 2
    assert "give a duration (1h, 30m, 7d) or a time" in since.output


def test_tokens_on_an_old_database_say_to_upgrade(sqlite_url: str, runner: CliRunner) -> None:
    line = one_line_error(runner.invoke(cli, ["tokens", "list", "--db", sqlite_url]))
    assert "run `jetfleet db upgrade --db" in line
