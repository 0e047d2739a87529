"""The agent self-update end to end, as ``bench/agent_update.py`` runs it with two devices.

A real controller (``jetfleet serve``, SQLite, embedded broker), two enrolled agents started
through ``packaging/scripts/agent-launch`` under a stand-in for systemd, a model deployed and
served under inference load; then with the operator's CLI: a bumped release rolled out (canary,
then the other device), a broken release whose canary rolls back by itself and stops the
rollout, and an older release refused without ``--allow-downgrade``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]


def test_update_rollback_and_downgrade_refusal_with_two_agents(tmp_path: Path) -> None:
    work = tmp_path / "work"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "agent_update.py"), "--devices", "2",
         "--no-write", "--workdir", str(work)],
        capture_output=True, text=True, timeout=220, cwd=ROOT,
    )  # fmt: skip
    out = done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, out[-6000:]
    assert last.startswith("agent-update: devices=2 updated=2 broken_release_rolled_back=yes ")
    assert last.endswith(" downgrade_refused=yes"), last
    # The canary's own launcher switched back (three failed starts), not the controller.
    canary_log = (work / "gateways" / "gw-01" / "agent.log").read_text(errors="replace")
    assert "agent-launch: rolled back from 0.2.2 to 0.2.1" in canary_log
    other_log = (work / "gateways" / "gw-02" / "agent.log").read_text(errors="replace")
    assert "0.2.2" not in other_log, "the device after the canary never got the broken release"
    assert ": not found" not in canary_log + other_log, "the launcher's watchdog died"
    # three failed starts of the broken release, then the rollback: no start lost to the port
    # still held by the launcher's watchdog
    assert "Address already in use" not in canary_log
    assert "gw-01 4" in out, out[-3000:]
