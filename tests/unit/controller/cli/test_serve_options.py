"""``jetfleet serve``'s TLS, credential and limit options become the controller's settings."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from controller.cli.serve_settings import Security, build_settings
from controller.settings import Settings


def settings(tmp_path: Path, broker_url: str | None, security: Security) -> Settings:
    return build_settings(
        None,
        broker_url,
        "127.0.0.1:0",
        tmp_path / "data",
        False,
        "127.0.0.1:0",
        None,
        "jetfleet/v1",
        security,
    )


def test_broker_tls_credentials_https_and_limits_reach_the_settings(tmp_path: Path) -> None:
    secret = tmp_path / "broker-password"
    secret.write_text("s3cret\nignored second line\n")
    files = {name: tmp_path / name for name in ("ca.pem", "c.pem", "c.key", "s.pem", "s.key")}
    security = Security(
        tls_cert=files["s.pem"],
        tls_key=files["s.key"],
        broker_ca=files["ca.pem"],
        broker_cert=files["c.pem"],
        broker_key=files["c.key"],
        broker_user="jetfleet-controller",
        broker_password_file=secret,
        max_upload=1024,
        max_mqtt_payload=512,
    )
    s = settings(tmp_path, "mqtts://broker.example:8883", security)
    auth = s.broker_auth
    assert (auth.username, auth.password) == ("jetfleet-controller", "s3cret")
    assert (auth.ca_file, auth.cert_file, auth.key_file) == (
        files["ca.pem"],
        files["c.pem"],
        files["c.key"],
    )
    assert (s.tls_cert_file, s.tls_key_file) == (files["s.pem"], files["s.key"])
    assert (s.max_upload_bytes, s.max_mqtt_payload_bytes) == (1024, 512)
    assert s.resolved_public_url(8443) == "https://127.0.0.1:8443"
    assert "s3cret" not in repr(auth)


@pytest.mark.parametrize(
    ("broker_url", "security", "message"),
    [
        ("mqtt://b:1883", Security(broker_ca=Path("ca.pem")), "need --broker mqtts://"),
        (None, Security(broker_ca=Path("ca.pem")), "need --broker mqtts://"),
        ("mqtts://b", Security(broker_cert=Path("c.pem")), "--broker-cert and --broker-key go"),
        (None, Security(tls_key=Path("s.key")), "--tls-cert and --tls-key go together"),
        (None, Security(broker_password_file=Path("p")), "--broker-password-file needs"),
    ],
)
def test_options_that_cannot_apply_are_refused(
    tmp_path: Path, broker_url: str | None, security: Security, message: str
) -> None:
    with pytest.raises(click.UsageError, match=message):
        settings(tmp_path, broker_url, security)
