"""A full state directory delays telemetry but loses none (found by the soak bench).

The state directory is a real 2 MiB tmpfs (root, as the soak and CI run); a filler file takes
the last free byte while the agent keeps producing samples, then is deleted.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.link.outbox import Outbox
from agent.link.spool import SpoolEntry
from bench.soak.disk import fill_to_last_byte
from shared.messages import Event
from shared.topics import Channel


@pytest.fixture
def small_dir(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.fail("this test mounts a tmpfs: run it as root (as CI does)", pytrace=False)
    path = tmp_path / "state"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> Path:
    return fill_to_last_byte(directory / "filler")


def event(n: int) -> Event:
    return Event.model_validate(
        {
            "device_id": "gw-full",
            "event_id": f"e{n}",
            "kind": "download_done",
            "ts": "2026-12-01T00:00:00Z",
        }
    )


def test_samples_made_while_the_state_directory_is_full_arrive_when_space_returns(
    small_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sent: list[SpoolEntry] = []

    def publish(entry: SpoolEntry) -> bool:
        sent.append(entry)
        return True

    outbox = Outbox.open(small_dir, 1 << 20, 3600.0, publish)
    outbox.start()
    try:
        outbox.send(Channel.EVENTS, event(0), "e0")
        filler = fill(small_dir)
        with caplog.at_level(logging.ERROR, logger="agent.link.outbox"):
            for n in range(1, 40):
                outbox.send(Channel.EVENTS, event(n), f"e{n}")
        assert any("cannot spool" in r.getMessage() for r in caplog.records), "disk not full"
        filler.unlink()
        outbox.send(Channel.EVENTS, event(40), "e40")
        deadline = time.monotonic() + 60
        while {e.key for e in sent} != {f"e{n}" for n in range(41)}:
            assert time.monotonic() < deadline, f"only {len({e.key for e in sent})} of 41 sent"
            time.sleep(0.05)
    finally:
        outbox.close()
    first_seen = list(dict.fromkeys(e.key for e in sent))
    assert first_seen == [f"e{n}" for n in range(41)]  # in the order they were made
