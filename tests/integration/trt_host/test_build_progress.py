"""Builds in the host stream their progress; the CPU backend's build is ONNX Runtime's
optimised-model save."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from agent.engines.build_runner import BuildFailed
from agent.runtimes.host import TrtHost
from agent.runtimes.ort import load_ort
from tests.integration.trt_host.conftest import Call, wait_until


def test_a_build_streams_progress_lines_before_its_result(
    host: TrtHost, models: dict[str, Path], tmp_path: Path
) -> None:
    source = tmp_path / "arriving.onnx"  # a FIFO: the build waits inside ONNX Runtime for it
    os.mkfifo(source)
    target = tmp_path / "classifier.optimized.onnx"
    lines: list[str] = []
    build = Call(lambda: host.build(source, target, {}, lines.append))
    wait_until(lambda: len(lines) >= 2, what="the first progress lines")
    assert lines == [f"reading {source} (0 bytes)", "optimizing the graph (level extended)"]
    assert build.is_alive()  # streamed while the build is still running
    assert not target.exists()
    with open(source, "wb") as fifo:
        fifo.write(models["classifier"].read_bytes())
    build.join(60)
    assert build.error is None
    info = build.result
    assert lines[2:] == [f"saving {target}", f"built {target}: {info['bytes']} bytes in "
                         f"{info['seconds']:.2f} s"]  # fmt: skip
    assert info["path"] == str(target)
    assert info["bytes"] == target.stat().st_size > 0
    built = host.load(target)
    image = np.random.default_rng(5).standard_normal((1, 3, 32, 32), dtype=np.float32)
    np.testing.assert_allclose(
        built.infer({"image": image})["probabilities"],
        load_ort(models["classifier"]).infer({"image": image})["probabilities"],
        rtol=1e-5,
        atol=1e-6,
    )


def test_a_failed_build_says_why_with_the_lines_it_streamed(host: TrtHost, tmp_path: Path) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx model")
    with pytest.raises(BuildFailed, match=r"build of broken\.onnx failed: ") as failure:
        host.build(broken, tmp_path / "out.onnx")
    assert failure.value.lines[0].startswith("reading")
    assert not (tmp_path / "out.onnx").exists()
    assert host.ping()["models"] == 0  # the host serves on after a failed build


def test_kill_9_of_the_host_mid_build_fails_the_build_leaves_no_file_and_the_host_builds_again(
    host: TrtHost, models: dict[str, Path], tmp_path: Path
) -> None:
    source = tmp_path / "arriving.onnx"  # a FIFO nobody writes: the build hangs in ONNX Runtime
    os.mkfifo(source)
    target = tmp_path / "classifier.optimized.onnx"
    lines: list[str] = []
    build = Call(lambda: host.build(source, target, {}, lines.append))
    wait_until(lambda: len(lines) >= 2, what="the build under way")
    pid = host.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    error = build.outcome()
    assert isinstance(error, BuildFailed)
    assert f"TensorRT host (pid {pid}) was killed by signal 9 (SIGKILL)" in str(error)
    assert error.lines[:2] == lines[:2]  # what it had streamed stays with the failure
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(target.name)) == []
    assert host.wait_settled(60)
    assert host.pid not in (None, pid)
    info = host.build(models["classifier"], target)
    assert info["bytes"] == target.stat().st_size > 0
