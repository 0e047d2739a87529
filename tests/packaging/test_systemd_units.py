"""Both units pass `systemd-analyze verify` and keep their sandbox and restart policy.

`verify` refuses a unit whose ExecStart binary does not exist, and /opt/jetfleet/venv exists only
where the package is installed; the test therefore verifies copies whose ExecStart points at a
real executable in a temporary directory (same arguments), so every other line is still checked.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parents[2] / "packaging" / "systemd"
ANALYZE = shutil.which("systemd-analyze")


def service_section(name: str) -> dict[str, str]:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(UNITS / name)
    return dict(parser["Service"])


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze not installed (apt install systemd)")
@pytest.mark.parametrize(
    ("name", "binary"),
    [
        ("jetfleet-agent.service", "/usr/lib/jetfleet/agent-launch"),
        ("jetfleet-controller.service", "/opt/jetfleet/controller-venv/bin/jetfleet"),
    ],
)
def test_systemd_analyze_verify(name: str, binary: str, tmp_path: Path) -> None:
    stand_in = tmp_path / "bin" / Path(binary).name
    stand_in.parent.mkdir()
    stand_in.write_text("#!/bin/sh\nexit 0\n")
    stand_in.chmod(0o755)
    text = (UNITS / name).read_text()
    assert f"ExecStart={binary} " in text
    (tmp_path / name).write_text(text.replace(f"ExecStart={binary}", f"ExecStart={stand_in}"))
    done = subprocess.run(
        [str(ANALYZE), "verify", str(tmp_path / name)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "Unknown key" not in done.stderr
    assert "Failed to parse" not in done.stderr


def test_verify_rejects_a_broken_unit(tmp_path: Path) -> None:
    if ANALYZE is None:
        pytest.skip("systemd-analyze not installed (apt install systemd)")
    bad = tmp_path / "broken.service"
    bad.write_text("[Service]\nType=notify\nExecStart=/nonexistent/jetfleet-agent run\n")
    done = subprocess.run([ANALYZE, "verify", str(bad)], capture_output=True, check=False)
    assert done.returncode != 0


def test_agent_unit_notifies_restarts_and_is_sandboxed() -> None:
    svc = service_section("jetfleet-agent.service")
    assert svc["Type"] == "notify"
    assert int(svc["WatchdogSec"]) > 0
    assert svc["Restart"] == "on-failure"
    assert svc["ExecStart"] == (
        "/usr/lib/jetfleet/agent-launch run --config /etc/jetfleet/agent.toml"
    )
    assert svc["EnvironmentFile"] == "-/etc/jetfleet/agent.env"
    assert svc["User"] == "jetfleet"
    assert set(svc["SupplementaryGroups"].split()) == {"video", "render"}
    assert svc["ProtectSystem"] == "strict"
    assert svc["ReadWritePaths"] == "/var/lib/jetfleet"
    assert svc["NoNewPrivileges"] == svc["PrivateTmp"] == "yes"
    assert svc["LoadCredential"].startswith("jetfleet:/etc/jetfleet/credentials")


def test_controller_unit_is_sandboxed_and_restarts() -> None:
    svc = service_section("jetfleet-controller.service")
    assert svc["User"] == "jetfleet"
    assert svc["Restart"] == "on-failure"
    assert svc["ProtectSystem"] == "strict"
    assert svc["ReadWritePaths"] == "/var/lib/jetfleet"
