"""Builders in a child process, for real: ONNX Runtime optimisation, progress, timeout, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psutil
import pytest

from agent.engines.build_failures import remembered
from agent.engines.build_protocol import BuildRequest
from agent.engines.build_runner import BUILDERS, BuildFailed, run_build
from agent.runtimes.base import warm_up
from agent.runtimes.ort import load_ort
from controller.demo.sample_models import classifier
from shared.delegate import DelegateConfig, OrtOptions


def request(tmp_path: Path, data: bytes, level: str = "all") -> BuildRequest:
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(data)
    config = DelegateConfig(onnxruntime=OrtOptions(graph_optimization_level=level))  # type: ignore[arg-type]
    return BuildRequest(onnx_path=onnx, output_path=tmp_path / "out" / "engine", config=config)


def test_ort_build_saves_an_optimised_model_that_serves_like_the_original(tmp_path: Path) -> None:
    progress: list[tuple[float, str]] = []
    req = request(tmp_path, classifier(seed=3))
    outcome = run_build(
        BUILDERS["onnxruntime"], req, timeout_s=60, on_progress=lambda p, m: progress.append((p, m))
    )
    assert outcome.output == req.output_path
    assert outcome.output.stat().st_size > 0
    assert outcome.peak_rss_bytes > 10 * 1024 * 1024
    assert outcome.seconds > 0
    assert [p for p, _ in progress] == [5.0, 100.0]
    assert progress[0][1] == "optimising at level all for CPUExecutionProvider"
    original, optimised = load_ort(req.onnx_path), load_ort(outcome.output)
    image = {"image": np.linspace(0, 1, 3 * 32 * 32, dtype=np.float32).reshape(1, 3, 32, 32)}
    np.testing.assert_allclose(
        optimised.infer(image)["probabilities"], original.infer(image)["probabilities"], rtol=1e-5
    )
    warm_up(optimised)


def test_broken_onnx_fails_with_onnxruntimes_own_error(tmp_path: Path) -> None:
    req = request(tmp_path, b"this is not a protobuf")
    with pytest.raises(BuildFailed) as failed:
        run_build(BUILDERS["onnxruntime"], req, timeout_s=60)
    assert any("INVALID_PROTOBUF" in line for line in failed.value.lines)
    assert "exited 3" in str(failed.value)
    assert not req.output_path.exists()


def test_timeout_kills_the_child_and_fails_the_build(tmp_path: Path) -> None:
    req = request(tmp_path, classifier())
    progress: list[float] = []
    with pytest.raises(BuildFailed, match=r"timed out after 1.5 s and was killed"):
        run_build(
            "tests.integration.agent.slow_builder",
            req,
            timeout_s=1.5,
            on_progress=lambda p, m: progress.append(p),
        )
    assert progress == [10.0]
    pid = int(req.output_path.with_suffix(".pid").read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_builder_killed_by_a_signal_fails_naming_it_and_leaves_no_engine(tmp_path: Path) -> None:
    req = request(tmp_path, classifier())
    with pytest.raises(BuildFailed) as failed:
        run_build("tests.integration.agent.crashing_builder", req, timeout_s=60)
    assert "was killed by SIGSEGV (signal 11)" in str(failed.value)
    assert not req.output_path.exists()  # the half-written engine is gone
    assert list(req.output_path.parent.iterdir()) == []  # and so is the request file
    assert remembered(failed.value)  # the model's failure: twins will not build it again


def test_cancel_stops_the_child(tmp_path: Path) -> None:
    req = request(tmp_path, classifier())
    calls = [0]

    def cancelled() -> bool:
        calls[0] += 1
        return calls[0] > 5

    with pytest.raises(BuildFailed, match="cancelled"):
        run_build("tests.integration.agent.slow_builder", req, timeout_s=60, cancelled=cancelled)
