"""The agent's identity file: written 0600, and merged under the config file and environment."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from agent.errors import SettingsError
from agent.identity_file import IDENTITY_KEYS, write_identity
from agent.link.enrolment import reachable_broker_url
from agent.settings import load_settings

IDENTITY = {
    "device_id": "gw-7",
    "controller_url": "http://ctl:8080",
    "broker_url": "mqtt://broker:1883",
    "topic_prefix": "acme/v1",
    "broker_username": "dev-gw-7",
    "broker_password": "s3cret",
    "api_token": "jf_0123456789ab.x",
    "fleet_key": {"key_id": "k1", "public_key": "AAAA"},
    "enrolled_at": "2026-11-30T00:00:00Z",
    "labels": {"site": "line-1"},
}


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in (
        "DEVICE_ID",
        "BROKER_URL",
        "BROKER_USERNAME",
        "LABELS",
        "CONTROLLER_URL",
        "TOPIC_PREFIX",
    ):
        monkeypatch.delenv(f"JETFLEET_{name}", raising=False)
    monkeypatch.setenv("JETFLEET_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_identity_file_is_private_and_holds_the_agreed_keys(state_dir: Path) -> None:
    path = write_identity(state_dir, IDENTITY)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert set(json.loads(path.read_text())) == set(IDENTITY_KEYS)
    write_identity(state_dir, {**IDENTITY, "broker_password": "new"})
    assert json.loads(path.read_text())["broker_password"] == "new"
    assert [p.name for p in state_dir.iterdir()] == ["identity.json"]


def test_the_identity_fills_what_is_not_set(state_dir: Path) -> None:
    write_identity(state_dir, IDENTITY)
    s = load_settings()
    assert s.device_id == "gw-7"
    assert s.broker_url == "mqtt://broker:1883"
    assert s.controller_url == "http://ctl:8080"
    assert s.mqtt_auth.username == "dev-gw-7"
    assert s.mqtt_auth.password == "s3cret"
    assert s.api_token is not None
    assert s.api_token.get_secret_value() == "jf_0123456789ab.x"
    assert s.labels == {"site": "line-1"}
    assert s.topic_prefix == "acme/v1"


def test_environment_and_config_file_win(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_identity(state_dir, IDENTITY)
    config = tmp_path / "agent.toml"
    config.write_text('controller_url = "https://ctl.example:8443"\n')
    monkeypatch.setenv("JETFLEET_BROKER_URL", "mqtts://broker.example:8883")
    s = load_settings(config)
    assert s.broker_url == "mqtts://broker.example:8883"
    assert s.controller_url == "https://ctl.example:8443"
    assert s.mqtt_auth.username == "dev-gw-7"


def test_another_device_id_than_the_identity_is_refused(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_identity(state_dir, IDENTITY)
    monkeypatch.setenv("JETFLEET_DEVICE_ID", "gw-8")
    with pytest.raises(SettingsError, match="identity of 'gw-7': enrol this device again"):
        load_settings()
    assert load_settings(with_identity=False).device_id == "gw-8"


def test_a_corrupt_identity_file_names_itself(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    (state_dir / "identity.json").write_text("{not json")
    with pytest.raises(SettingsError, match=r"identity\.json.*enrol again"):
        load_settings()


@pytest.mark.parametrize(
    ("broker", "controller", "expected"),
    [
        ("mqtt://127.0.0.1:1884", "http://ctl.example:8080", "mqtt://ctl.example:1884"),
        ("mqtts://localhost:8883", "https://10.0.0.5", "mqtts://10.0.0.5:8883"),
        ("mqtt://127.0.0.1:1884", "http://127.0.0.1:8080", "mqtt://127.0.0.1:1884"),
        ("mqtt://broker.example:1883", "http://ctl.example:8080", "mqtt://broker.example:1883"),
    ],
)
def test_a_broker_on_the_controllers_loopback_is_reached_at_the_controllers_host(
    broker: str, controller: str, expected: str
) -> None:
    assert reachable_broker_url(broker, controller) == expected
