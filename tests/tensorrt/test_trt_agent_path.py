"""The agent's TensorRT path for real: hot swap under load with validation against reference
outputs, kill -9 of a TensorRT host mid-request, zoo-style models through TensorRT's parser.

Marked ``tensorrt``: runs where the TensorRT interpreter imports TensorRT and a CUDA device
answers (an x86 GPU host with a TensorRT from PyPI, a Jetson); skips with the reason elsewhere.
The same scenarios run in CI with the host on its CPU backend (tests/integration/trt_host).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from agent.engines.build_protocol import BuildRequest
from agent.engines.build_runner import BUILDERS, BuildFailed, run_build
from agent.engines.trt_interpreter import tensorrt_launch
from agent.errors import InferenceError
from agent.runtimes.host import TrtHost
from agent.runtimes.loading import load_engine
from agent.runtimes.ort import load_ort
from agent.runtimes.trt_hosts import load_in_shared_host
from agent.swap.admission import need_of
from agent.swap.hotswap import Candidate, ValidationFailed
from agent.swap.journal import Pointer
from agent.swap.validation import parse_reference
from controller.analysis.reference_outputs import reference_npz
from controller.demo.sample_models import classifier
from shared.delegate import DelegateConfig
from tests.integration.hotswap.test_swap_under_load import Rig, hammer
from tests.integration.trt_host.conftest import FAST, Call, regions, wait_until
from tests.model_corpus import CorpusModel, caffe2_ir3, conv_net

pytestmark = pytest.mark.tensorrt

from tests.tensorrt.conftest_trt import skip_without_tensorrt  # noqa: E402

skip_without_tensorrt()

NO_LIBRARIES = ("CUBLAS", "CUBLAS_LT", "CUDNN")
IMAGE = np.random.default_rng(9).standard_normal((1, 3, 32, 32), dtype=np.float32)


def plan(tmp_path: Path, name: str, onnx: bytes, **config: object) -> tuple[Path, Path]:
    """(onnx path, plan path) of ``onnx`` built by the agent's build path under TensorRT."""
    source = tmp_path / f"{name}.onnx"
    source.write_bytes(onnx)
    request = BuildRequest(
        onnx_path=source,
        output_path=tmp_path / f"{name}.engine",
        config=DelegateConfig.model_validate({"disabled_tactic_sources": NO_LIBRARIES, **config}),
    )
    return source, run_build(BUILDERS["tensorrt"], request, 600).output


@pytest.fixture
def trt_host() -> Iterator[TrtHost]:
    launch = tensorrt_launch()
    started = TrtHost(
        replace(FAST, interpreter=launch.interpreter, backend=launch.backend), name="trt-test"
    ).start()
    yield started
    started.close()


def test_hot_swaps_under_http_load_validate_and_fail_no_request(tmp_path: Path) -> None:
    """Four KServe clients hammer the model while TensorRT plans of two versions are swapped in
    turn (in the shared host, each validated against the controller's reference outputs)."""
    plans = {}
    for version, seed in (("1", 1), ("2", 2), ("3", 3)):
        onnx, engine = plan(tmp_path, f"v{version}", classifier(seed=seed))
        plans[version] = (engine, reference_npz(onnx.read_bytes()))
    rig = Rig(tmp_path)

    def candidate(version: str) -> Candidate:
        engine, reference = plans[version]
        return Candidate(
            "classifier", version, "0" * 64, lambda: load_in_shared_host(engine),
            need_of(1 << 20, 1 << 20), Pointer(version, "0" * 64, str(engine)),
            reference=parse_reference(reference),
        )  # fmt: skip

    try:
        rig.swapper.swap(candidate("1"))
        stop, results = threading.Event(), []  # type: ignore[var-annotated]
        clients = [threading.Thread(target=hammer, args=(rig.url, stop, results)) for _ in range(4)]
        for thread in clients:
            thread.start()
        try:
            for i in range(10):
                rig.swapper.swap(candidate(str(2 + i % 2)))
        finally:
            stop.set()
            for thread in clients:
                thread.join(30)
        assert results, "the clients sent nothing"
        assert [r for r in results if r[0] != 200] == []
        assert {v for _, v in results} >= {"2", "3"}
        assert rig.swapper.stats.total["classifier"] == 11
        # validation is real: version 2's plan checked against version 1's reference is refused
        plans["4"] = (plans["2"][0], plans["1"][1])
        with pytest.raises(ValidationFailed):
            rig.swapper.swap(candidate("4"))
        entry = rig.registry.get("classifier")
        assert entry is not None
        assert entry.version == "3"
    finally:
        rig.close()


def test_kill_9_of_a_tensorrt_host_mid_request_fails_it_then_the_host_serves_again(
    trt_host: TrtHost, tmp_path: Path
) -> None:
    _, engine = plan(tmp_path, "model", classifier(seed=4))
    model = trt_host.load(engine)
    before = model.infer({"image": IMAGE})["probabilities"]
    old_pid, old_prefix = trt_host.pid, trt_host.shm_prefix
    assert old_pid is not None
    assert old_prefix is not None
    os.kill(old_pid, signal.SIGSTOP)
    call = Call(lambda: model.infer({"image": IMAGE}))
    wait_until(lambda: trt_host.in_flight() == 1, what="the request on the wire")
    os.kill(old_pid, signal.SIGKILL)
    error = call.outcome()
    assert isinstance(error, InferenceError)
    assert f"TensorRT host (pid {old_pid}) was killed by signal 9 (SIGKILL)" in str(error)
    assert regions(old_prefix) == []
    assert trt_host.wait_settled(120)
    assert trt_host.pid not in (None, old_pid)
    assert model.state == "serving"
    np.testing.assert_array_equal(model.infer({"image": IMAGE})["probabilities"], before)


@pytest.mark.parametrize(
    ("corpus", "must_build"),
    [(conv_net(7), True), (conv_net(13), False), (caffe2_ir3(), False)],
    ids=["conv-opset7-ir3", "conv-opset13-computed-bn", "caffe2-ir3-opset9"],
)
def test_zoo_style_models_build_and_match_onnxruntime_or_fail_with_the_parsers_words(
    tmp_path: Path, corpus: CorpusModel, must_build: bool
) -> None:
    """IR 3 with initializers in graph.input (opset 7) must build; BatchNormalization parameters
    computed by ConstantOfShape (opset 13) and the Caffe2 conversion (IR 3, names with '/') either
    build and match ONNX Runtime or fail naming what the parser refused (printed as ZOO lines)."""
    source = tmp_path / "zoo-ort.onnx"
    source.write_bytes(corpus.data)
    reference = load_ort(source)
    feeds = {
        spec.name: np.random.default_rng(3).standard_normal(spec.shape).astype(np.float32)
        for spec in reference.inputs
    }
    refused: BuildFailed | None = None
    try:
        _, engine = plan(tmp_path, "zoo", corpus.data)
    except BuildFailed as failed:
        print(f"ZOO {corpus.name}: build refused: {' '.join(failed.lines)[-400:]}")
        refused = failed
    if refused is not None:
        assert not must_build, " ".join(refused.lines)
        assert refused.lines
        return
    served = load_engine("tensorrt", engine)
    try:
        got, want = served.infer(feeds), reference.infer(feeds)
        assert set(got) == set(want)
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-3, atol=1e-4)
        print(f"ZOO {corpus.name}: built, matches ONNX Runtime")
    finally:
        served.close()
        reference.close()
