"""kill -9 of a host mid-request, mid-load and mid-swap; kill -9 of the agent; hung hosts.

A killed host fails only its own requests, with how it ended; it is restarted with backoff and
its models are reloaded; no /dev/shm region of the dead host is left. "Mid-request" holds the
host with SIGSTOP so the request is on the wire when SIGKILL lands; "mid-load" gives the host a
FIFO as model file, so it is blocked inside ONNX Runtime's load when it is killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from agent.errors import InferenceError, ModelLoadError
from agent.runtimes.host import TrtHost
from agent.runtimes.ort import load_ort
from agent.serving.core import ModelRegistry
from agent.swap.admission import need_of
from agent.swap.headroom import HeadroomProbe
from agent.swap.hotswap import Candidate, HotSwapper
from agent.swap.journal import Pointer, SwapJournal
from tests.integration.trt_host.conftest import FAST, Call, regions, wait_until

IMAGE = np.random.default_rng(9).standard_normal((1, 3, 32, 32), dtype=np.float32)
KILLED = r"TensorRT host \(pid \d+\) was killed by signal 9 \(SIGKILL\)"


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.fixture
def second_host() -> Iterator[TrtHost]:
    started = TrtHost(FAST, name="second-host").start()
    yield started
    started.close()


def test_kill_9_mid_request_fails_that_request_then_the_host_restarts_and_serves(
    host: TrtHost, models: dict[str, Path]
) -> None:
    model = host.load(models["classifier"])
    expected = load_ort(models["classifier"]).infer({"image": IMAGE})["probabilities"]
    model.infer({"image": IMAGE})
    old_pid, old_prefix = host.pid, host.shm_prefix
    assert old_pid is not None
    assert old_prefix is not None
    assert len(regions(old_prefix)) == 2
    os.kill(old_pid, signal.SIGSTOP)
    call = Call(lambda: model.infer({"image": IMAGE}))
    wait_until(lambda: host.in_flight() == 1, what="the request on the wire")
    os.kill(old_pid, signal.SIGKILL)
    error = call.outcome()
    assert isinstance(error, InferenceError)
    assert f"TensorRT host (pid {old_pid}) was killed by signal 9 (SIGKILL)" in str(error)
    assert regions(old_prefix) == []  # unlinked before the request failed
    assert host.wait_settled(60)
    assert host.pid not in (None, old_pid)
    assert host.restarts == 1
    assert model.state == "serving"
    np.testing.assert_array_equal(model.infer({"image": IMAGE})["probabilities"], expected)


def test_requests_while_the_host_restarts_fail_at_once_with_the_reason(
    models: dict[str, Path],
) -> None:
    host = TrtHost(replace(FAST, first_backoff_s=3600.0)).start()  # it will not be back soon
    try:
        model = host.load(models["classifier"])
        pid = host.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: model.state == "restarting", what="the death to be seen")
        with pytest.raises(InferenceError, match=f"is restarting: {KILLED}"):
            model.infer({"image": IMAGE})
        with pytest.raises(ModelLoadError, match=KILLED):
            host.load(models["classifier"])
    finally:
        host.close()


def test_kill_9_mid_load_fails_the_load_and_leaves_other_models_serving(
    host: TrtHost, second_host: TrtHost, models: dict[str, Path], tmp_path: Path
) -> None:
    serving = host.load(models["classifier"])
    fifo = tmp_path / "arriving.onnx"
    os.mkfifo(fifo)
    pid = second_host.pid
    assert pid is not None
    load = Call(lambda: second_host.load(fifo))
    fds: list[int] = []
    wait_until(lambda: has_reader_kept(fifo, fds), what="the host inside its load")
    os.kill(pid, signal.SIGKILL)
    error = load.outcome()
    close_kept(fds)
    assert isinstance(error, ModelLoadError)
    assert "cannot load arriving.onnx" in str(error)
    assert f"(pid {pid}) was killed by signal 9 (SIGKILL)" in str(error)
    assert serving.infer({"image": IMAGE})["probabilities"].shape == (1, 10)
    assert host.restarts == 0
    assert second_host.wait_settled(60)  # the second host is back, with nothing to reload
    assert second_host.ping()["models"] == 0


def has_reader_kept(fifo: Path, fds: list[int]) -> bool:
    """Like a writer arriving: opens the FIFO once a reader is there and keeps it open (no EOF)."""
    try:
        fds.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        return False
    return True


def close_kept(fds: list[int]) -> None:
    while fds:
        os.close(fds.pop())


def test_kill_9_mid_swap_keeps_the_old_version_serving(
    host: TrtHost, second_host: TrtHost, models: dict[str, Path], tmp_path: Path
) -> None:
    registry = ModelRegistry()
    swapper = HotSwapper(registry, SwapJournal(tmp_path), HeadroomProbe("cpu"), tmp_path)
    fifo = tmp_path / "v2.onnx"
    os.mkfifo(fifo)

    def candidate(version: str, path: Path, in_host: TrtHost) -> Candidate:
        return Candidate(
            "classifier", version, "0" * 64, lambda: in_host.load(path),
            need_of(7000, 7000), Pointer(version, "0" * 64, str(path)),
        )  # fmt: skip

    swapper.swap(candidate("1", models["classifier"], host))  # worker mode: one host per model
    fds: list[int] = []
    swap = Call(lambda: swapper.swap(candidate("2", fifo, second_host)))
    wait_until(lambda: has_reader_kept(fifo, fds), what="the new version loading")
    pid = second_host.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    error = swap.outcome()
    close_kept(fds)
    assert isinstance(error, ModelLoadError)
    assert "killed by signal 9 (SIGKILL)" in str(error)
    entry = registry.get("classifier")
    assert entry is not None
    assert entry.version == "1"
    with entry.lease() as model:
        assert model.infer({"image": IMAGE})["probabilities"].shape == (1, 10)
    registry.close_all()


def test_a_model_whose_reload_fails_is_reported_failed_with_the_reason(
    host: TrtHost, models: dict[str, Path]
) -> None:
    doomed = host.load(models["batched"])
    kept = host.load(models["classifier"])
    models["batched"].write_bytes(b"truncated by a bad disk")
    pid = host.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: host.pid != pid, what="the death to be seen")
    assert host.wait_settled(60)
    assert (doomed.state, kept.state) == ("failed", "serving")
    assert doomed.reason is not None
    assert doomed.reason.startswith("reload after a host restart failed:")
    with pytest.raises(InferenceError, match=r"batched\.onnx is failed: reload after"):
        doomed.infer({"image": IMAGE})
    assert kept.infer({"image": IMAGE})["probabilities"].shape == (1, 10)


def test_a_host_that_does_not_answer_is_killed_and_restarted(models: dict[str, Path]) -> None:
    host = TrtHost(replace(FAST, infer_timeout_s=1.0)).start()
    try:
        model = host.load(models["classifier"])
        pid = host.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # hung: alive, silent
        with pytest.raises(InferenceError, match=r"SIGKILL\) \(no answer to infer within 1 s\)"):
            model.infer({"image": IMAGE})
        assert host.wait_settled(60)
        assert model.infer({"image": IMAGE})["probabilities"].shape == (1, 10)
    finally:
        host.close()


def test_kill_9_of_the_agent_makes_its_host_unlink_its_regions_and_exit(
    models: dict[str, Path],
) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", f"{__package__}.agent_process", str(models["classifier"])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as agent:  # fmt: skip
        try:
            assert agent.stdout is not None
            started = json.loads(agent.stdout.readline())
            assert len(regions(started["prefix"])) == 2
            agent.kill()
            agent.wait(30)
            wait_until(lambda: gone(started["host_pid"]), what="the orphaned host to exit")
            assert regions(started["prefix"]) == []
        finally:
            agent.kill()


def test_the_host_runs_from_a_root_holding_only_agent_trt_host(models: dict[str, Path]) -> None:
    host = TrtHost(replace(FAST, isolate=True)).start()
    try:
        root = Path(host.hello["path"]).parent.parent
        assert sorted(p.name for p in (root / "agent").iterdir()) == ["__init__.py", "trt_host"]
        model = host.load(models["classifier"])
        assert model.infer({"image": IMAGE})["probabilities"].shape == (1, 10)
    finally:
        host.close()
