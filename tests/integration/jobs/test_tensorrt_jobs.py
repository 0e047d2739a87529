"""Profiling and tuning with TensorRT for real: IProfiler layer times, an fp16 candidate.

Marked ``tensorrt``: runs where the TensorRT interpreter (agent/engines/trt_interpreter.py)
imports TensorRT and a CUDA device answers; skips with the reason everywhere else. Nothing here
fakes TensorRT: builds, profiles and benches run in TensorRT hosts and build children.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agent.engines.build_protocol import BuildRequest
from agent.engines.build_runner import BUILDERS, run_build
from agent.jobs.profiling import summarize
from agent.jobs.tuning_bench import BenchHost, bench_candidate
from agent.swap.admission import Admission
from agent.swap.headroom import HeadroomProbe
from controller.demo.sample_models import classifier
from shared.delegate import DelegateConfig
from shared.jobs import parse_candidate

pytestmark = pytest.mark.tensorrt

from tests.tensorrt.conftest_trt import skip_without_tensorrt  # noqa: E402

skip_without_tensorrt()


def test_iprofiler_times_every_layer_of_the_timed_runs(tmp_path: Path) -> None:
    from agent.jobs.profiling_trt import profile_trt

    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(classifier())
    request = BuildRequest(
        onnx_path=onnx, output_path=tmp_path / "plan.engine", config=DelegateConfig()
    )
    plan = run_build(BUILDERS["tensorrt"], request, 600).output
    image = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)

    records, runs = profile_trt(plan, lambda specs: {"image": image}, runs=5, warmups=2)

    assert runs == 5
    assert records
    times = summarize(records, runs)
    assert {o.device for o in times.ops} == {"GPU"}
    assert 0 < sum(o.share for o in times.ops) <= 1.0
    assert times.per_run_ms > 0


def test_an_fp16_candidate_runs_and_stays_within_its_tolerance(tmp_path: Path) -> None:
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(classifier())
    probe = HeadroomProbe("dgpu")
    host = BenchHost(
        runtime="tensorrt",
        admit=lambda need: Admission("warm", "test", need.total, 0, 0),
        snapshot=probe.snapshot,
        available_providers=list,
    )

    row = bench_candidate(
        parse_candidate("fp16"), DelegateConfig(), onnx, None, tmp_path, host, runs=10, warmups=2
    )

    assert row.status == "ok", row.reason
    assert row.latency_p50_ms is not None
    assert row.accuracy is not None
    assert row.accuracy.within_tolerance
