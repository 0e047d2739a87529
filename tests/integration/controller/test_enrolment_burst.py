"""A burst of devices reporting at once all enrol: ingest never holds up the broker's acks.

Mosquitto keeps at most 1,000 QoS 1 messages queued for a slow subscriber and drops the rest
(``max_queued_messages``; it logs "Outgoing messages are being dropped for client ..."). This
test sends well over that faster than the database stores them, from a process of its own
(:mod:`tests.burst_publisher`), as gateways would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from controller.server import Controller
from tests.integration.controller.conftest import poll

DEVICES = 2500
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.alone  # with other tests on the same cores the controller reads slower than the burst
def test_a_burst_of_reports_larger_than_the_broker_queue_all_enrols(
    controller: Controller, api: httpx.Client, prefix: str
) -> None:
    burst = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.burst_publisher",
            controller.broker_url,
            prefix,
            str(DEVICES),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert burst.returncode == 0, burst.stderr
    assert f"published {DEVICES}" in burst.stdout

    counts: list[int] = []

    def enrolled() -> bool:
        counts.append(len(api.get("/api/v1/devices").json()))
        return counts[-1] == DEVICES

    try:
        poll(enrolled, timeout_s=90, what=f"{DEVICES} devices enrolled")
    except pytest.fail.Exception:
        pytest.fail(
            f"{counts[-1]} of {DEVICES} devices enrolled after 90 s; a count that stopped short "
            "means the broker dropped messages for the controller (see the broker's log)"
        )
    assert api.get("/api/v1/ingest").json()["rejected"] == 0
