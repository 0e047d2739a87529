"""``jetfleet broker config``'s files: what Mosquitto is told, and what is kept private."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from controller.broker_admin.mosquitto_config import BrokerConfig, render_mosquitto_conf
from controller.broker_admin.passwords import PasswordHash, verify_password
from controller.cli.main import cli
from controller.errors import InvalidInput

PLUGIN = "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so"


def _config(tmp_path: Path, **kw: object) -> BrokerConfig:
    base: dict[str, object] = {
        "controller_user": "ctl",
        "plugin_path": Path(PLUGIN),
        "dynsec_file": tmp_path / "ds.json",
        "topic_prefix": "jetfleet/v1",
    }
    return BrokerConfig(**{**base, **kw})  # type: ignore[arg-type]


def test_conf_denies_anonymous_limits_packets_and_loads_the_plugin(tmp_path: Path) -> None:
    text = render_mosquitto_conf(_config(tmp_path, listener=("127.0.0.1", 18830)))
    lines = text.splitlines()
    for line in (
        "per_listener_settings false",
        "allow_anonymous false",
        "max_packet_size 1048576",
        f"plugin {PLUGIN}",
        f"plugin_opt_config_file {tmp_path / 'ds.json'}",
        "listener 18830 127.0.0.1",
    ):
        assert line in lines
    assert "certfile" not in text


def test_tls_files_add_a_tls_listener(tmp_path: Path) -> None:
    text = render_mosquitto_conf(
        _config(
            tmp_path,
            tls_cert=Path("/etc/c.pem"),
            tls_key=Path("/etc/k.pem"),
            tls_listener=("0.0.0.0", 8883),
        )
    )
    assert "listener 8883 0.0.0.0\ncertfile /etc/c.pem\nkeyfile /etc/k.pem" in text


def test_bad_combinations_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="--tls-key"):
        _config(tmp_path, tls_cert=Path("/etc/c.pem"))
    with pytest.raises(InvalidInput, match="must not start with 'dev-'"):
        _config(tmp_path, controller_user="dev-ctl")


def test_the_cli_writes_private_files_and_refuses_to_lose_enrolled_devices(
    tmp_path: Path,
) -> None:
    out = tmp_path / "mq"
    args = ["broker", "config", "--out", str(out), "--plugin", PLUGIN, "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    written = json.loads(result.output)
    for name in ("dynsec_file", "password_file"):
        assert stat.S_IMODE(Path(written[name]).stat().st_mode) == 0o600
    doc = json.loads(Path(written["dynsec_file"]).read_text())
    assert doc["defaultACLAccess"] == {
        "publishClientSend": False,
        "publishClientReceive": False,
        "subscribe": False,
        "unsubscribe": False,
    }
    (client,) = doc["clients"]
    password = Path(written["password_file"]).read_text().strip()
    stored = PasswordHash(client["password"], client["salt"], client["iterations"])
    assert verify_password(password, stored)
    assert {r["rolename"] for r in doc["roles"]} == {"jetfleet-controller", "jetfleet-device"}

    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 1
    assert "holds the enrolled devices" in again.output
    assert again.output.count("\n") == 1
    assert CliRunner().invoke(cli, [*args, "--force"]).exit_code == 0
    assert Path(written["password_file"]).read_text().strip() != password
