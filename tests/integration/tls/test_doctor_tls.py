"""``jetfleet-agent doctor`` against a TLS broker and an HTTPS controller: each TLS mistake an
operator makes gets its own verdict and the setting that fixes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agent.hardware.probe import HardwareFacts
from agent.service.doctor import CheckResult, observe, run_checks
from agent.settings import AgentSettings
from controller.server import Controller
from shared.topics import Topics
from tests.integration.tls.tls_broker import TlsBroker
from tests.tls_ca import TlsFiles

AGENT = Path(sys.executable).with_name("jetfleet-agent")
NO_HARDWARE = HardwareFacts(jetson=None, gpu=None, tensorrt_version=None, sources={})


def verdicts(tmp_path: Path, broker_url: str, **settings: Any) -> dict[str, CheckResult]:
    """Run the doctor's real probes (broker, controller) for these settings."""
    agent = AgentSettings(
        broker_url=broker_url, state_dir=tmp_path / "state", runtime="onnxruntime", **settings
    )
    return {r.name: r for r in run_checks(observe(agent, hardware=lambda: NO_HARDWARE))}


def test_doctor_command_passes_with_the_ca_and_fails_without_it(
    tls_broker: TlsBroker, tls: TlsFiles, tmp_path: Path
) -> None:
    config = tmp_path / "agent.toml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("JETFLEET_")}
    env["CREDENTIALS_DIRECTORY"] = str(tmp_path / "credentials")

    def doctor() -> tuple[int, dict[str, dict[str, str]]]:
        done = subprocess.run(
            [str(AGENT), "doctor", "--json", "--config", str(config)],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        return done.returncode, {c["name"]: c for c in json.loads(done.stdout)}

    base = f'broker_url = "{tls_broker.url}"\nstate_dir = "{tmp_path}"\nruntime = "onnxruntime"\n'
    config.write_text(base + f'broker_ca_file = "{tls.ca_cert}"\n')
    code, checks = doctor()
    assert checks["broker"]["status"] == "ok", checks["broker"]
    assert checks["broker"]["detail"].endswith("accepts this agent over TLS")
    assert code == 0, checks

    config.write_text(base)
    code, checks = doctor()
    assert code == 1
    assert checks["broker"]["status"] == "fail"
    assert checks["broker"]["detail"].startswith(f"TLS to {tls_broker.url} failed: ")
    assert "set broker_ca_file" in checks["broker"]["fix"]


def test_doctor_names_a_missing_ca_file_a_missing_client_certificate_and_a_plain_url(
    cert_broker: TlsBroker, tls: TlsFiles, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-ca.pem"
    broker = verdicts(tmp_path, cert_broker.url, broker_ca_file=missing)["broker"]
    assert broker.status == "fail"
    assert f"broker_ca_file {missing} not found" in broker.detail
    assert "broker_ca_file" in broker.fix

    broker = verdicts(tmp_path, cert_broker.url, broker_ca_file=tls.ca_cert)["broker"]
    assert broker.status == "fail"
    assert broker.detail.startswith(f"TLS to {cert_broker.url} failed: ")
    assert "broker_cert_file and broker_key_file" in broker.fix

    broker = verdicts(
        tmp_path,
        cert_broker.url,
        broker_ca_file=tls.ca_cert,
        broker_cert_file=tls.client_cert,
        broker_key_file=tls.client_key,
    )["broker"]
    assert broker.status == "ok", broker

    plain = cert_broker.url.replace("mqtts://", "mqtt://")
    broker = verdicts(tmp_path, plain)["broker"]
    assert broker.status == "fail"
    assert "closed the connection without answering" in broker.detail
    assert "mqtts://" in broker.fix


def test_doctor_checks_an_https_controller_against_controller_ca_file(
    https_controller: tuple[Controller, Topics], mosquitto: str, tls: TlsFiles, tmp_path: Path
) -> None:
    controller, _ = https_controller
    url = controller.http_url
    trusted = verdicts(tmp_path, mosquitto, controller_url=url, controller_ca_file=tls.ca_cert)
    assert trusted["controller"].status == "ok", trusted["controller"]
    assert trusted["clock"].status == "ok"

    untrusted = verdicts(tmp_path, mosquitto, controller_url=url)["controller"]
    assert untrusted.status == "fail"
    assert untrusted.detail.startswith(f"TLS to {url} failed: ")
    assert "controller_ca_file" in untrusted.fix

    missing = tmp_path / "missing-ca.pem"
    absent = verdicts(tmp_path, mosquitto, controller_url=url, controller_ca_file=missing)
    assert absent["controller"].status == "fail"
    assert f"controller_ca_file {missing}: not found" in absent["controller"].detail
