"""The short soak: about 3 minutes of a real fleet under >= 5 seeded faults.

Its own Mosquitto (restarted, taken down), its own PostgreSQL cluster (initdb in the test's
directory, on a free port; stopped and started again), ``jetfleet serve`` on it (killed with
kill -9 and restarted), two real agents as processes behind link proxies (partitioned,
killed mid-download and mid-swap, state directory filled), inference clients and simulated
gateways, while a rollout, a rollback and redeploys happen. Asserts counts, never times.
Outages overlap the faults after them (scaled down to 0.2 of the issue's lengths). Run as root
(the full state directory is a tmpfs the bench mounts; the cluster runs as ``postgres``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.soak import faults as F
from bench.soak.run import Config, Soak

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

# F.CONTROLLER_KILL: what agents send while the controller is down waits in its ingest link's
# persistent session on the broker; before, that link's clean session lost it.
# F.POSTGRESQL_RESTART: telemetry that arrives while the database is down is held, unacknowledged,
# until it is back (controller/ingest/batch.py); before, the writer dropped it after 3.5 s.
KINDS = (
    F.POSTGRESQL_RESTART,
    F.CONTROLLER_KILL,
    F.BROKER_RESTART,
    F.AGENT_KILL_SWAP,
    F.PARTITION,
    F.DISK_FULL,
    F.BROKER_DOWN,
    F.AGENT_KILL_DOWNLOAD,
)


def test_fleet_survives_a_short_fault_schedule(tmp_path: Path) -> None:
    cfg = Config(
        minutes=3, agents=2, seed=18, faults=len(KINDS),
        outage_scale=0.2, sims=5, work=tmp_path, kinds=KINDS,
    )  # fmt: skip
    outcome = Soak(cfg).run()
    print(outcome.text())
    assert outcome.faults >= 5
    assert outcome.telemetry.produced > 0
    assert outcome.telemetry.stored > 0
    assert outcome.telemetry.lost == 0, outcome.text()
    assert outcome.telemetry.duplicated == 0, outcome.text()
    assert outcome.unexplained == [], outcome.text()
    assert outcome.converged_s is not None, outcome.text()
    assert any("PostgreSQL started" in s for s in outcome.steps), outcome.text()
    assert not any("NOT stored" in s for s in outcome.steps), outcome.text()
    # the full-disk fault needs a tmpfs, so root: said, not skipped (the brief runs tests as root)
    assert not any("no tmpfs: not root" in s for s in outcome.steps), (
        "the full-disk fault was not done: run the suite as root (it mounts a tmpfs)"
    )
    # Resident memory is not judged here: three minutes is warm-up (ONNX Runtime arenas, SQLAlchemy
    # and import caches grow for the first minutes), so a 5 % bound would fail on growth that is
    # no leak. The 30-minute soak (bench/soak.py, bench/results/soak.md) judges RSS; this run
    # judges what warm-up does not excuse: file descriptors and threads.
    fd_or_thread = [x for x in outcome.leaks if ":rss" not in x]
    assert fd_or_thread == [], outcome.text()
