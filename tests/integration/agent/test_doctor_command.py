"""``jetfleet-agent doctor --json`` as an operator runs it, against the real Mosquitto."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.ports import free_port

AGENT = Path(sys.executable).with_name("jetfleet-agent")


def doctor(config: Path, tmp_path: Path) -> tuple[int, dict[str, dict[str, str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JETFLEET_")}
    env["CREDENTIALS_DIRECTORY"] = str(tmp_path / "credentials")
    done = subprocess.run(
        [str(AGENT), "doctor", "--json", "--config", str(config)],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    checks = {c["name"]: c for c in json.loads(done.stdout)}
    return done.returncode, checks


def test_doctor_passes_with_a_reachable_broker_and_fails_without_one(
    mosquitto: str, tmp_path: Path
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(
        f'broker_url = "{mosquitto}"\nstate_dir = "{tmp_path}"\nruntime = "onnxruntime"\n'
    )
    code, checks = doctor(config, tmp_path)
    assert code == 0, checks
    assert checks["broker"]["status"] == "ok"
    assert checks["controller"]["status"] == "warn"
    assert "controller_url" in checks["controller"]["fix"]

    config.write_text(
        f'broker_url = "mqtt://127.0.0.1:{free_port()}"\nstate_dir = "{tmp_path}"\n'
        'runtime = "onnxruntime"\n'
    )
    code, checks = doctor(config, tmp_path)
    assert code == 1
    assert checks["broker"]["status"] == "fail"
    assert "broker_url" in checks["broker"]["fix"]
