"""The scale bench at a small size: 60 simulated gateways with their own
broker credentials, two ``jetfleet serve`` replicas on a fresh PostgreSQL database and the
bench's own Mosquitto; a clean rollout, then one whose leader is killed with -9 mid-rollout and
started again. Asserts counts, never times."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.scale.outcome import VERSIONS, Config
from bench.scale.run import Scale

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]


def test_small_fleet_rolls_out_through_a_leader_kill_without_losing_telemetry(
    tmp_path: Path, postgres_server_url: str
) -> None:
    cfg = Config(
        devices=60, replicas=2, server_url=postgres_server_url, lease_ttl_s=3.0,
        telemetry_interval_s=2.0, steady_s=3.0, restart_after_s=3.0, settle_s=5.0,
        work=tmp_path,
    )  # fmt: skip
    outcome = Scale(cfg).run()
    text = outcome.text()
    print(text)
    assert outcome.completed, text
    assert outcome.failover is not None, text
    assert outcome.failover.successor is not None, text
    assert outcome.failover.takeover_s is not None, text
    final = outcome.final
    assert final.devices == 60, text
    assert final.on_final == 60, text
    assert (final.intermediate, final.steps_not_one) == (0, 0), text
    assert outcome.telemetry.produced > 0, text
    assert outcome.telemetry.stored == outcome.telemetry.produced, text
    assert (outcome.telemetry.lost, outcome.telemetry.duplicated) == (0, 0), text
    assert text.splitlines()[-1].startswith("scale: devices=60 replicas=2 "), text
    assert {label.split()[0] for label, _ in outcome.rollouts} == set(VERSIONS[1:])
