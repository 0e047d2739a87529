"""Agent settings: file + environment, environment wins, bad keys named, CLI exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.cli import cli
from agent.errors import SettingsError
from agent.settings import load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.upper().startswith("JETFLEET_"):
            monkeypatch.delenv(name)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent.toml"
    path.write_text(text)
    return path


def test_file_values_are_read_and_env_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write(
        tmp_path,
        'device_id = "gw-file"\nbroker_url = "mqtt://broker:1884"\n'
        'telemetry_interval_s = 5\n[labels]\nsite = "lab"\n',
    )
    monkeypatch.setenv("JETFLEET_DEVICE_ID", "gw-env")
    monkeypatch.setenv("JETFLEET_LABELS", '{"site":"field","class":"orin-nano"}')
    s = load_settings(config)
    assert s.device_id == "gw-env"
    assert s.labels == {"site": "field", "class": "orin-nano"}
    assert s.broker == ("broker", 1884)
    assert s.telemetry_interval_s == 5
    assert s.serve == ("127.0.0.1", 8000)
    assert s.topic_prefix == "jetfleet/v1"


def test_defaults_without_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JETFLEET_DEVICE_ID", "gw-1")
    s = load_settings(None)
    assert (s.runtime, s.telemetry_interval_s, s.controller_url) == ("auto", 10.0, None)


@pytest.mark.parametrize(
    ("env", "value", "key"),
    [
        ("JETFLEET_LABELS", "{not json", "JETFLEET_LABELS"),
        ("JETFLEET_BROKER_URL", "http://x:1", "JETFLEET_BROKER_URL"),
        ("JETFLEET_SERVE_ADDRESS", "localhost", "JETFLEET_SERVE_ADDRESS"),
        ("JETFLEET_TELEMETRY_INTERVAL_S", "0", "JETFLEET_TELEMETRY_INTERVAL_S"),
        ("JETFLEET_SIMULATED_PROFILE", "xavier-9000", "JETFLEET_SIMULATED_PROFILE"),
        ("JETFLEET_TOPIC_PREFIX", "a/#", "JETFLEET_TOPIC_PREFIX"),
        ("JETFLEET_DEVICE_ID", "no spaces", "JETFLEET_DEVICE_ID"),
    ],
)
def test_bad_env_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, key: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(SettingsError) as info:
        load_settings(None)
    assert info.value.key == key
    assert "\n" not in str(info.value)


def test_unknown_key_in_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="colour") as info:
        load_settings(write(tmp_path, 'device_id = "gw"\ncolour = "red"\n'))
    assert "Extra inputs" in info.value.reason


def test_missing_device_id_says_how_to_set_it() -> None:
    with pytest.raises(SettingsError, match="JETFLEET_DEVICE_ID"):
        load_settings(None).require_device_id()


def test_cli_run_with_bad_settings_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["run", "--config", str(write(tmp_path, "device_id = [\n"))])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert result.output.startswith("error: invalid setting --config")


def test_cli_run_without_device_id_exits_2() -> None:
    result = CliRunner().invoke(cli, ["run"])
    assert result.exit_code == 2
    assert "JETFLEET_DEVICE_ID" in result.output
