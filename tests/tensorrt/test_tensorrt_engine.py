"""TensorRT for real, through the agent's path: build in ``agent.trt_host.build_child`` under the
TensorRT interpreter, check the plan's header, load and infer in the agent's TensorRT host.

Marked ``tensorrt``: runs where the TensorRT interpreter imports TensorRT and a CUDA device
answers; skips with the reason everywhere else. Nothing here fakes TensorRT. Every build leaves
out the cuBLAS/cuDNN tactic sources (``disabled_tactic_sources``, a delegate-config option): the
H200 test host has no cuBLAS/cuDNN, and memory-tight Jetsons are configured the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.engines.build_protocol import BuildRequest
from agent.engines.build_runner import BUILDERS, BuildFailed, run_build
from agent.runtimes.loading import load_engine
from agent.trt_host.plan_header import UNKNOWN, describe
from controller.demo.sample_models import classifier
from shared.delegate import DelegateConfig

pytestmark = pytest.mark.tensorrt

from tests.tensorrt.conftest_trt import skip_without_tensorrt  # noqa: E402

skip_without_tensorrt()


NO_LIBRARIES = ("CUBLAS", "CUBLAS_LT", "CUDNN")
IMAGE = {"image": np.linspace(0, 1, 3 * 32 * 32, dtype=np.float32).reshape(1, 3, 32, 32)}


def request(tmp_path: Path, data: bytes, **config: object) -> BuildRequest:
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(data)
    return BuildRequest(
        onnx_path=onnx,
        output_path=tmp_path / "plan.engine",
        config=DelegateConfig.model_validate({"disabled_tactic_sources": NO_LIBRARIES, **config}),
        timing_cache_path=tmp_path / "timing.cache",
    )


def test_plan_builds_with_progress_loads_and_matches_onnxruntime(tmp_path: Path) -> None:
    from agent.runtimes.ort import load_ort

    progress: list[float] = []
    req = request(tmp_path, classifier(seed=4))
    outcome = run_build(BUILDERS["tensorrt"], req, 600, lambda p, m: progress.append(p))
    assert progress[-1] == 100.0
    assert req.timing_cache_path is not None
    assert req.timing_cache_path.stat().st_size > 0
    blob = outcome.output.read_bytes()
    assert describe(blob) != ""
    assert describe(blob) == UNKNOWN or describe(blob)[0].isdigit()
    got = load_engine("tensorrt", outcome.output).infer(IMAGE)["probabilities"]
    want = load_ort(req.onnx_path).infer(IMAGE)["probabilities"]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_fp16_plan_from_the_delegate_config_stays_close_to_onnxruntime(tmp_path: Path) -> None:
    from agent.runtimes.ort import load_ort

    req = request(tmp_path, classifier(seed=4), precision="fp16")
    outcome = run_build(BUILDERS["tensorrt"], req, 600)
    got = load_engine("tensorrt", outcome.output).infer(IMAGE)["probabilities"]
    want = load_ort(req.onnx_path).infer(IMAGE)["probabilities"]
    np.testing.assert_allclose(got, want, rtol=5e-2, atol=5e-3)


def test_a_refittable_plan_takes_a_new_versions_weights_in_place(tmp_path: Path) -> None:
    """``refittable: true`` in the delegate config → BuilderFlag.REFIT → the hot swap's refit path:
    the same loaded engine answers with the new version's weights."""
    from agent.runtimes.ort import load_ort

    req = request(tmp_path, classifier(seed=4), refittable=True)
    outcome = run_build(BUILDERS["tensorrt"], req, 600)
    model: Any = load_engine("tensorrt", outcome.output)
    try:
        new = tmp_path / "v2.onnx"
        new.write_bytes(classifier(seed=9))
        before = model.infer(IMAGE)["probabilities"]
        assert model.refittable is True
        model.refit_from_onnx(new)
        after = model.infer(IMAGE)["probabilities"]
        want = load_ort(new).infer(IMAGE)["probabilities"]
        np.testing.assert_allclose(after, want, rtol=1e-3, atol=1e-4)
        assert not np.allclose(before, after)
    finally:
        model.close()


def test_plain_plans_are_not_refittable(tmp_path: Path) -> None:
    outcome = run_build(BUILDERS["tensorrt"], request(tmp_path, classifier(seed=4)), 600)
    model = load_engine("tensorrt", outcome.output)
    try:
        assert getattr(model, "refittable", True) is False
    finally:
        model.close()


def test_broken_onnx_fails_with_the_parsers_own_errors(tmp_path: Path) -> None:
    with pytest.raises(BuildFailed) as failed:
        run_build(BUILDERS["tensorrt"], request(tmp_path, b"not onnx"), 600)
    assert failed.value.lines


def test_a_plan_of_another_tensorrt_is_refused_before_deserializing(tmp_path: Path) -> None:
    from agent.errors import ModelLoadError

    fake = tmp_path / "old.engine"
    fake.write_bytes(b"ftrt\x00\x00\x00\x00" + bytes(16) + bytes((9, 9, 9, 9)) + bytes(64))
    with pytest.raises(ModelLoadError, match="rebuild the engine"):
        load_engine("tensorrt", fake)
