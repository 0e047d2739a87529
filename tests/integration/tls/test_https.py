"""The controller over https:// with a certificate of the test CA, and ``jetfleet serve``'s TLS
options: what an operator types, what works and what is refused with one line."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from controller.cli.main import cli
from controller.server import Controller
from shared.codec import encode
from shared.topics import Channel, Topics
from tests.integration.controller.agent_messages import reported
from tests.integration.controller.conftest import MqttPeer, poll
from tests.tls_ca import TlsFiles, make_ca


def cli_run(tmp_path: Path, *args: str) -> Result:
    """The ``jetfleet`` CLI with a config directory of its own (no saved login)."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    return CliRunner().invoke(cli, list(args), env=env)


def test_the_cli_lists_the_devices_of_an_https_controller_given_its_ca_file(
    https_controller: tuple[Controller, Topics], tls: TlsFiles, tmp_path: Path
) -> None:
    controller, topics = https_controller
    url = controller.http_url
    assert url.startswith("https://127.0.0.1:")
    peer = MqttPeer(controller.broker_url).connect()
    try:
        peer.publish(
            topics.device("gw-https", Channel.REPORTED),
            encode(reported("gw-https", {"site": "tls"})),
            retain=True,
        )
        verify = ssl.create_default_context(cafile=str(tls.ca_cert))
        poll(
            lambda: httpx.get(f"{url}/api/v1/devices/gw-https", verify=verify).status_code == 200,
            what="gw-https known to the controller",
        )
        listed = cli_run(
            tmp_path, "devices", "ls", "--url", url, "--ca-file", str(tls.ca_cert), "--json"
        )
        assert listed.exit_code == 0, listed.output
        assert [d["id"] for d in json.loads(listed.output)] == ["gw-https"]

        untrusted = cli_run(tmp_path, "devices", "ls", "--url", url, "--json")
        assert untrusted.exit_code != 0
        assert "gw-https" not in untrusted.output
        assert "Traceback" not in untrusted.output

        plain = url.replace("https://", "http://")
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{plain}/api/v1/devices", timeout=10)
        refused = cli_run(tmp_path, "devices", "ls", "--url", plain, "--json")
        assert refused.exit_code != 0
        assert "gw-https" not in refused.output
    finally:
        peer.publish(topics.device("gw-https", Channel.REPORTED), b"", retain=True)
        peer.close()


def serve_error(tmp_path: Path, *options: str) -> str:
    """``jetfleet serve`` with ``options`` must stop at once with one line and no traceback."""
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
    assert result.exit_code in (1, 2), result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = [line for line in result.output.strip().splitlines() if line.startswith("Error")]
    assert len(lines) == 1, result.output
    return lines[0]


def test_serve_refuses_missing_unreadable_and_mismatched_tls_files_with_one_line(
    tls: TlsFiles, tmp_path: Path
) -> None:
    missing = tmp_path / "nope.pem"
    line = serve_error(tmp_path, "--tls-cert", str(missing), "--tls-key", str(tls.server_key))
    assert "--tls-cert" in line
    assert "nope.pem" in line

    line = serve_error(tmp_path, "--tls-cert", str(tls.server_cert))
    assert "--tls-cert and --tls-key go together" in line

    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    line = serve_error(tmp_path, "--tls-cert", str(garbage), "--tls-key", str(tls.server_key))
    assert f"cannot use TLS certificate {garbage}" in line

    other = make_ca(tmp_path / "other-pki", name="other-ca")
    line = serve_error(
        tmp_path, "--tls-cert", str(tls.server_cert), "--tls-key", str(other.server_key)
    )
    assert "--tls-key is not the private key of --tls-cert" in line

    line = serve_error(tmp_path, "--broker-ca", str(tls.ca_cert))
    assert "--broker-ca/--broker-cert/--broker-key need --broker mqtts://" in line

    line = serve_error(tmp_path, "--broker", "mqtts://127.0.0.1:8883", "--broker-ca", str(garbage))
    assert f"broker CA file {garbage} holds no usable PEM certificate" in line

    line = serve_error(
        tmp_path,
        "--broker",
        "mqtts://127.0.0.1:8883",
        "--broker-cert",
        str(tls.client_cert),
        "--broker-key",
        str(other.client_key),
    )
    assert "--broker-key is not the private key of --broker-cert" in line

    line = serve_error(tmp_path, "--max-upload", "lots")
    assert "expected a positive size like 2G" in line
