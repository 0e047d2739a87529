"""A local user who creates files with the TensorRT host's region names before the
host does. The probe's names came from the agent's pid, so they could be made ahead of time; as
root that cost 8 failed inferences, and for the packaged non-root agent the host's reader thread
died of PermissionError cleaning up, and inference hung for good.

Here the planted files are immutable (``chattr +i``: not even root may remove or open them for
writing), which is what another user's files in the sticky /dev/shm are to the agent's user.
Real host processes on ONNX Runtime.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agent.runtimes.host import TrtHost
from agent.runtimes.ort import load_ort
from agent.trt_host import shm
from tests.integration.trt_host.conftest import FAST, regions, wait_until

SMALL = np.ones((1, 3, 32, 32), np.float32)
BATCH = np.random.default_rng(5).standard_normal((16, 3, 32, 32), dtype=np.float32)


class Planted:
    """Immutable files in /dev/shm, removed at the end."""

    def __init__(self) -> None:
        self.paths: list[Path] = []

    def plant(self, name: str) -> None:
        path = Path(shm.SHM_DIR) / name
        path.write_bytes(b"planted")
        subprocess.run(["chattr", "+i", str(path)], check=True)
        self.paths.append(path)

    def remove(self) -> None:
        for path in self.paths:
            subprocess.run(["chattr", "-i", str(path)], check=False)
            path.unlink(missing_ok=True)


@pytest.fixture
def planted() -> Iterator[Planted]:
    made = Planted()
    yield made
    made.remove()


def test_two_hosts_never_share_region_names() -> None:
    one, two = TrtHost(FAST).start(), TrtHost(FAST).start()
    try:
        assert one.shm_prefix is not None
        assert two.shm_prefix is not None
        random_one, random_two = one.shm_prefix.split(".")[-1], two.shm_prefix.split(".")[-1]
        assert len(random_one) == len(random_two) == 17  # 16 hex digits and "-"
        assert random_one != random_two
    finally:
        one.close()
        two.close()


def test_names_taken_ahead_get_new_ones_and_a_death_still_restarts_the_host(
    host: TrtHost, models: dict[str, Path], planted: Planted
) -> None:
    model = host.load(models["batched"])
    reference = load_ort(models["batched"])
    model.infer({"image": SMALL})
    prefix = host.shm_prefix
    assert prefix is not None
    for number in range(2, 6):  # the next input and output regions' names, as a user sees them
        planted.plant(f"{prefix}in-1-{number}")
        planted.plant(f"{prefix}out-1-{number}")

    got = model.infer({"image": BATCH})  # needs larger regions: the planted names are taken

    np.testing.assert_array_equal(
        got["probabilities"], reference.infer({"image": BATCH})["probabilities"]
    )
    old_pid = host.pid
    assert old_pid is not None
    os.kill(old_pid, signal.SIGKILL)
    wait_until(lambda: host.restarts == 1, what="the host to be restarted")
    assert host.wait_settled(60)
    assert host.pid not in (None, old_pid)
    assert model.state == "serving"
    np.testing.assert_array_equal(
        model.infer({"image": BATCH})["probabilities"],
        reference.infer({"image": BATCH})["probabilities"],
    )
    assert sorted(regions(prefix)) == sorted(p.name for p in planted.paths)  # ours are gone
