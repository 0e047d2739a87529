"""A gateway joins the fleet by enrolment alone: the real ``jetfleet-agent enroll`` against a
real controller, then a real agent process with nothing but that state directory connects to
the ACL'd Mosquitto, reports, and serves a deployed model."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from click.testing import CliRunner

from controller.cli.main import cli
from controller.demo import sample_models
from controller.demo.fleet import (
    Process,
    _spawn,
    all_desired_serving,
    infer,
    random_inputs,
    wait_for,
)
from tests.integration.security_broker.conftest import Secured
from tests.ports import free_port

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.parametrize("secured", ["mosquitto"], indirect=True),
]

AGENT = [sys.executable, "-c", "from agent.cli import main; main()"]


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without any JETFLEET_* setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JETFLEET_")}
    return {**env, **extra}


def _enroll(state_dir: Path, url: str, token: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *AGENT,
            "enroll",
            "--controller",
            url,
            "--token",
            token,
            "--device-id",
            "gw-e2e",
            "--json",
        ],
        env=_clean_env(JETFLEET_STATE_DIR=str(state_dir)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def agents() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for proc in started:
        proc.stop()


def test_an_enrolled_agent_reports_and_serves_a_deployed_model(
    secured: Secured, tmp_path: Path, agents: list[Process]
) -> None:
    url = secured.controller.http_url
    operator = ["--url", url, "--token", secured.admin_token, "--json"]
    made = CliRunner().invoke(
        cli, ["devices", "enroll-token", "--labels", "site=line-9", "--expires", "1h", *operator]
    )
    assert made.exit_code == 0, made.output
    token = json.loads(made.output)["token"]
    state_dir = tmp_path / "agent-state"

    enrolled = _enroll(state_dir, url, token)
    assert enrolled.returncode == 0, enrolled.stderr
    summary = json.loads(enrolled.stdout)
    assert summary["device_id"] == "gw-e2e"
    assert "broker_password" not in summary
    identity_file = state_dir / "identity.json"
    assert stat.S_IMODE(identity_file.stat().st_mode) == 0o600
    identity = json.loads(identity_file.read_text())
    assert {
        "device_id",
        "controller_url",
        "broker_url",
        "broker_username",
        "broker_password",
        "api_token",
        "fleet_key",
        "enrolled_at",
    } <= set(identity)
    assert identity["broker_username"] == "dev-gw-e2e"
    assert identity["broker_url"] == secured.broker_url
    assert identity["fleet_key"]["key_id"]

    reused = _enroll(tmp_path / "other-state", url, token)
    assert reused.returncode == 1
    assert "already used by gw-e2e" in reused.stderr
    assert "(HTTP 410)" in reused.stderr
    assert not (tmp_path / "other-state" / "identity.json").exists()

    pushed = secured.api.put(
        "/api/v1/models/classifier/versions/1.0.0",
        content=sample_models.classifier(),
        headers={"Content-Type": "application/octet-stream"},
    )
    assert pushed.status_code == 201, pushed.text
    agent = _spawn(
        "gw-e2e",
        [*AGENT, "run"],
        tmp_path / "logs",
        _clean_env(
            JETFLEET_STATE_DIR=str(state_dir),
            JETFLEET_SERVE_ADDRESS=f"127.0.0.1:{free_port()}",
            JETFLEET_TELEMETRY_INTERVAL_S="1",
        ),
    )
    agents.append(agent)

    def reported() -> dict[str, object] | None:
        answer = secured.api.get("/api/v1/devices/gw-e2e")
        return answer.json() if answer.status_code == 200 else None

    device = wait_for("gw-e2e to report to the controller", reported, 90, [agent])
    assert device["labels"] == {"site": "line-9"}

    deployed = secured.api.post(
        "/api/v1/deployments", json={"model": "classifier", "version": "1.0.0", "device": "gw-e2e"}
    )
    assert deployed.status_code == 200, deployed.text
    devices = wait_for(
        "gw-e2e to serve classifier 1.0.0",
        lambda: (
            (ds := secured.api.get("/api/v1/devices").json()) and all_desired_serving(ds) and ds
        ),
        120,
        [agent],
    )
    (served,) = devices
    spec = secured.api.get("/api/v1/models/classifier/versions/1.0.0").json()
    with httpx.Client(timeout=10) as http:
        out = infer(
            served["serve_url"], "classifier", random_inputs(spec, np.random.default_rng(0)), http
        )
    assert out["model_name"] == "classifier"
    assert out["outputs"][0]["data"]

    revoked = CliRunner().invoke(cli, ["devices", "revoke", "gw-e2e", *operator])
    assert revoked.exit_code == 0, revoked.output
    assert json.loads(revoked.output)["revoked_at"]
    wait_for(
        "the controller to see gw-e2e offline",
        lambda: reported() and not secured.api.get("/api/v1/devices/gw-e2e").json()["online"],
        30,
    )
