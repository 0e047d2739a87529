"""The second security probe's low findings on a real controller (uvicorn, SQLite, Mosquitto,
API tokens on):
anonymous /healthz told the database and broker URLs; a device token's deeply nested JSON body
was a 500 in the authorisation check; label values took newlines and NULs (one label became two
lines in a log or an audit export); ``--trusted-proxy 10.0.0.5/24`` was silently widened to the
whole /24 and ``0.0.0.0/0`` accepted."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from controller.cli.main import cli
from controller.errors import InvalidInput
from controller.server import Controller
from controller.settings import parse_trusted_proxy
from tests.integration.controller.conftest import bearer, new_token


def test_anonymous_healthz_names_no_host_path_or_user(
    controller: Controller, data_dir: Path
) -> None:
    answer = httpx.get(f"{controller.http_url}/healthz", timeout=10)

    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "database": "sqlite", "broker": "mqtt"}
    assert "127.0.0.1" not in answer.text
    assert str(data_dir.parent) not in answer.text


def test_a_device_tokens_deeply_nested_body_is_refused_not_a_server_error(
    controller: Controller,
) -> None:
    token = new_token(controller, "gw-1", "device", device_id="gw-1")
    body = "[" * 100_000 + "]" * 100_000
    with httpx.Client(base_url=controller.http_url, headers=bearer(token), timeout=10) as device:
        answer = device.put(
            "/api/v1/engines/" + "a" * 64,
            content=body,
            headers={"Content-Type": "application/json"},
        )
    assert answer.status_code == 403, answer.text
    assert "speaks for device 'gw-1'" in answer.json()["detail"]


@pytest.mark.parametrize("value", ["line\nbreak", "nul\x00byte", "tab\there", "del\x7f"])
def test_label_values_with_control_characters_are_refused(
    controller: Controller, api: httpx.Client, value: str
) -> None:
    answer = api.put("/api/v1/devices/gw-1/labels", json={"labels": {"site": value}})
    assert answer.status_code == 400, answer.text
    assert "no control characters" in answer.json()["detail"]


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("10.0.0.5/24", "give the proxy (10.0.0.5) or the network (10.0.0.0/24)"),
        ("0.0.0.0/0", "trusts X-Forwarded-For from every address"),
        ("::/0", "trusts X-Forwarded-For from every address"),
    ],
)
def test_a_trusted_proxy_is_taken_as_written_or_refused(given: str, says: str) -> None:
    with pytest.raises(InvalidInput, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_trusted_proxy(given)
    assert parse_trusted_proxy("10.0.0.0/24") == "10.0.0.0/24"
    assert parse_trusted_proxy("10.0.0.5") == "10.0.0.5"
    refused = CliRunner().invoke(cli, ["serve", "--trusted-proxy", given])
    assert refused.exit_code != 0
    assert says in refused.output


def test_a_devices_uploads_are_bounded_by_its_quota_and_nothing_past_it_is_stored(
    controller: Controller, api: httpx.Client
) -> None:
    """Device artifact uploads had no quota: one gateway credential could fill the store."""
    services = controller.services
    assert services is not None
    services.engines.quota.bytes_per_window = 300_000  # the test's quota; 8 GiB by default
    token = new_token(controller, "gw-q", "device", device_id="gw-q")
    chunks = [bytes([n]) * 100_000 for n in range(4)]
    with httpx.Client(base_url=controller.http_url, headers=bearer(token), timeout=30) as device:
        answers = [device.post("/api/v1/artifacts", content=c) for c in chunks]

    assert [a.status_code for a in answers] == [201, 201, 201, 429]
    refused = answers[-1]
    assert "would pass its quota of 300,000 bytes" in refused.json()["detail"]
    assert int(refused.headers["Retry-After"]) > 0
    sha = hashlib.sha256(chunks[-1]).hexdigest()
    assert api.head(f"/api/v1/artifacts/{sha}").status_code == 404
    assert api.post("/api/v1/artifacts", content=chunks[-1]).status_code == 201  # operators
