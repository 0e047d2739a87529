"""Where the CLI takes URL, token and CA file from, and the file `jetfleet login` writes."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from controller.client.user_config import (
    ConfigFileError,
    Credentials,
    UserConfig,
    config_path,
    load,
    resolve,
    same_controller,
    save,
)

SAVED = UserConfig(url="http://ctl:8080", token="jf_saved", ca_file="/etc/ca.pem")


def test_options_beat_the_environment_which_beats_the_file() -> None:
    env = {"JETFLEET_TOKEN": "jf_env", "JETFLEET_CA_FILE": "/env/ca.pem"}
    url = "http://ctl:8080/"
    assert resolve(url, token=None, ca_file=None, env={}, saved=SAVED) == Credentials(
        "jf_saved", "/etc/ca.pem"
    )
    assert resolve(url, token=None, ca_file=None, env=env, saved=SAVED) == Credentials(
        "jf_env", "/env/ca.pem"
    )
    assert resolve(url, token="jf_opt", ca_file="/o.pem", env=env, saved=SAVED) == Credentials(
        "jf_opt", "/o.pem"
    )


def test_the_saved_token_is_never_sent_to_another_controller() -> None:
    other = resolve("http://elsewhere:8080", token=None, ca_file=None, env={}, saved=SAVED)
    assert other == Credentials(None, None)
    https = resolve("https://ctl:8080", token=None, ca_file=None, env={}, saved=SAVED)
    assert https == Credentials(None, None)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("http://ctl:8080", "http://ctl:8080/", True),
        ("http://CTL:8080", "http://ctl:8080", True),
        ("http://ctl", "http://ctl:80", True),
        ("https://ctl", "https://ctl:443/", True),
        ("http://ctl:8080", "http://ctl:8081", False),
        ("http://ctl:8080/a", "http://ctl:8080/b", False),
        ("http://ctl:8080", None, False),
    ],
)
def test_same_controller(a: str, b: str | None, same: bool) -> None:
    assert same_controller(a, b) is same


def test_config_lives_under_xdg_config_home() -> None:
    assert config_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/jetfleet/config.toml")
    assert config_path({}) == Path.home() / ".config" / "jetfleet" / "config.toml"


def test_saved_config_is_private_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "jetfleet" / "config.toml"
    config = UserConfig(url="http://ctl:8080", token='jf_a"b\\c', ca_file="/päth/ca.pem")
    assert save(config, path) == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load(path) == config
    save(UserConfig(url="http://other:1"), path)
    assert load(path) == UserConfig(url="http://other:1")
    assert [p.name for p in path.parent.iterdir()] == ["config.toml"]


def test_missing_file_is_empty_and_a_broken_one_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert load(path) == UserConfig()
    path.write_text("url = [\n")
    with pytest.raises(ConfigFileError, match=r"cannot read .*config.toml.*jetfleet login"):
        load(path)
    path.write_text("token = 5\n")
    with pytest.raises(ConfigFileError, match="token must be strings"):
        load(path)
