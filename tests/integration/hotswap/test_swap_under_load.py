"""Swaps under concurrent HTTP load: no failed request, old version kept on a bad update."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx
import numpy as np
import pytest

from agent.runtimes.base import LoadedModel, TensorSpec
from agent.runtimes.ort import load_ort
from agent.serving.app import create_app
from agent.serving.core import ModelRegistry
from agent.serving.http_server import ServingServer
from agent.serving.prometheus import PromMetrics
from agent.swap.admission import Headroom, need_of
from agent.swap.headroom import HeadroomProbe
from agent.swap.hotswap import Candidate, HotSwapper, ValidationFailed
from agent.swap.journal import Pointer, SwapJournal
from agent.swap.validation import parse_reference
from agent.swap.worker import WorkerModel
from agent.telemetry.metrics import Metrics
from controller.analysis.reference_outputs import reference_npz
from controller.demo.sample_models import anomaly, classifier
from tests.integration.trt_host.conftest import wait_until
from tests.ports import free_port

WAIT_S = 30.0
BODY = {"inputs": [{"name": "image", "shape": [1, 3, 32, 32], "datatype": "FP32",
                    "data": [0.5] * 3072}]}  # fmt: skip


class TightProbe(HeadroomProbe):
    """A real probe whose budget is forced to two models, to drive admission to cold swaps."""

    def headroom(self) -> Headroom:
        return Headroom(1 << 40, 40 * 1024 * 1024, "forced for the test")


class Rig:
    def __init__(self, tmp_path: Path, probe: HeadroomProbe | None = None) -> None:
        self.tmp = tmp_path
        self.registry = ModelRegistry()
        self.swapper = HotSwapper(
            self.registry, SwapJournal(tmp_path), probe or HeadroomProbe("cpu"), tmp_path
        )
        self.prom = PromMetrics(self.registry, self.swapper.stats)
        app = create_app(self.registry, Metrics(), lambda: True, "t", self.prom)
        self.server = ServingServer(app, "127.0.0.1", free_port())
        self.url = f"http://127.0.0.1:{self.server.start()}"

    def candidate(self, name: str, version: str, data: bytes, worker: bool = False,
                  reference: bytes | None = None) -> Candidate:  # fmt: skip
        path = self.tmp / f"{name}-{version}.onnx"
        path.write_bytes(data)
        load = (lambda: WorkerModel("onnxruntime", path)) if worker else (lambda: load_ort(path))
        return Candidate(
            name, version, "0" * 64, load, need_of(len(data), len(data)),
            Pointer(version, "0" * 64, str(path)),
            reference=parse_reference(reference) if reference else None,
        )  # fmt: skip

    def close(self) -> None:
        self.server.stop()
        self.registry.close_all()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.close()


def hammer(url: str, stop: threading.Event, results: list[tuple[int, str]]) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        while not stop.is_set():
            r = client.post("/v2/models/classifier/infer", json=BODY)
            results.append((r.status_code, r.json().get("model_version", r.text)))


def swap_many(rig: Rig, worker: bool, rounds: int) -> list[tuple[int, str]]:
    rig.swapper.swap(rig.candidate("classifier", "1", classifier(seed=1), worker))
    rig.swapper.swap(rig.candidate("anomaly", "1", anomaly(), worker))
    stop, results = threading.Event(), []  # type: ignore[var-annotated]
    clients = [threading.Thread(target=hammer, args=(rig.url, stop, results)) for _ in range(4)]
    for t in clients:
        t.start()
    try:
        for i in range(rounds):
            version = str(2 + i % 2)
            rig.swapper.swap(
                rig.candidate("classifier", version, classifier(seed=int(version)), worker)
            )
    finally:
        stop.set()
        for t in clients:
            t.join(30)
    return results


def test_warm_swaps_under_load_fail_no_request_and_leave_other_models_alone(rig: Rig) -> None:
    anomaly_entry = None
    results = swap_many(rig, worker=False, rounds=20)
    anomaly_entry = rig.registry.get("anomaly")
    assert results, "the clients sent nothing"
    assert [r for r in results if r[0] != 200] == []
    assert {v for _, v in results} >= {"2", "3"}
    assert anomaly_entry is not None
    assert anomaly_entry.version == "1"
    assert rig.swapper.stats.total["classifier"] == 21
    metrics = httpx.get(f"{rig.url}/metrics").text
    assert 'jetfleet_swaps_total{model="classifier"} 21' in metrics
    assert (
        'jetfleet_active_engine{model="anomaly",version="1",engine_key="",runtime="onnxruntime",'
        'fallback="false"} 1'
    ) in metrics
    assert 'jetfleet_swap_memory_bytes{model="classifier",when="after",kind="rss"}' in metrics


class HeldModel:
    """A candidate's real ONNX Runtime model with a gate the test controls: while ``hold`` is
    set, an inference signals ``entered`` and waits for ``release`` before the model runs it.
    It notes whether ``close`` came while a request was inside."""

    def __init__(self, inner: LoadedModel) -> None:
        self.inner = inner
        self.hold = threading.Event()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.inside = 0
        self.closed = False
        self.closed_with_a_request_inside = False

    @property
    def inputs(self) -> Sequence[TensorSpec]:
        return self.inner.inputs

    @property
    def outputs(self) -> Sequence[TensorSpec]:
        return self.inner.outputs

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.inside += 1
        try:
            if self.hold.is_set():
                self.entered.set()
                assert self.release.wait(WAIT_S), "the test never released the request"
            return self.inner.infer(feeds)
        finally:
            self.inside -= 1

    def close(self) -> None:
        self.closed_with_a_request_inside |= self.inside > 0
        self.closed = True
        self.inner.close()


def ort_outputs(data: bytes, tmp: Path) -> dict[str, np.ndarray]:
    """What ONNX Runtime answers for BODY, straight from the model file."""
    path = tmp / "expected.onnx"
    path.write_bytes(data)
    model = load_ort(path)
    try:
        feeds = {
            i["name"]: np.asarray(i["data"], dtype=np.float32).reshape(i["shape"])
            for i in BODY["inputs"]
        }
        return model.infer(feeds)
    finally:
        model.close()


def test_a_request_inside_the_old_engine_finishes_on_it_after_the_swap_began(rig: Rig) -> None:
    """Close without drain, made deterministic: a request is held inside version 1 while the
    swap to version 2 switches; the old engine is not closed before that request leaves it, the
    request answers with version 1's outputs, and new requests go to version 2 meanwhile."""
    first = rig.candidate("classifier", "1", classifier(seed=1))
    held: list[HeldModel] = []

    def load_held() -> LoadedModel:
        held.append(HeldModel(first.load()))
        return held[-1]

    rig.swapper.swap(dataclasses.replace(first, load=load_held))
    [old_model] = held
    old_entry = rig.registry.get("classifier")
    assert old_entry is not None
    expected = ort_outputs(classifier(seed=1), rig.tmp)

    answers: list[httpx.Response] = []
    old_model.hold.set()
    request = threading.Thread(
        target=lambda: answers.append(
            httpx.post(f"{rig.url}/v2/models/classifier/infer", json=BODY, timeout=WAIT_S)
        )
    )
    request.start()
    swap = threading.Thread(
        target=rig.swapper.swap, args=(rig.candidate("classifier", "2", classifier(seed=2)),)
    )
    try:
        assert old_model.entered.wait(WAIT_S), "the request never reached version 1"
        assert old_entry.inflight == 1
        swap.start()
        wait_until(
            lambda: rig.registry.versions().get("classifier") == "2",
            WAIT_S,
            "the swap to switch to version 2",
        )
        # Past the switch the swap either drains (drain() marks the entry retired, then waits
        # for the request) or closes the old engine: wait until it did one of the two.
        wait_until(
            lambda: bool(old_entry._retired or old_model.closed),
            WAIT_S,
            "the swap to drain or close version 1",
        )
        assert not old_model.closed, "version 1 was closed with a request inside it"
        assert swap.is_alive(), "the swap finished while a request was inside version 1"
        fresh = httpx.post(f"{rig.url}/v2/models/classifier/infer", json=BODY, timeout=WAIT_S)
        assert fresh.status_code == 200, fresh.text
        assert fresh.json()["model_version"] == "2"
    finally:
        old_model.release.set()
        request.join(WAIT_S)
        if swap.ident is not None:
            swap.join(WAIT_S)
    assert not swap.is_alive()
    [answer] = answers
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["model_version"] == "1"
    assert {o["name"] for o in body["outputs"]} == set(expected)
    for output in body["outputs"]:
        got = np.asarray(output["data"], dtype=np.float32).reshape(output["shape"])
        np.testing.assert_allclose(got, expected[output["name"]], rtol=1e-6, atol=0)
    assert old_model.closed, "version 1 is closed once drained"
    assert not old_model.closed_with_a_request_inside
    assert rig.registry.versions()["classifier"] == "2"


def test_cold_swaps_hold_requests_instead_of_failing_them(tmp_path: Path) -> None:
    rig = Rig(tmp_path, TightProbe("cpu"))
    try:
        rig.swapper.swap(rig.candidate("classifier", "1", classifier(seed=1)))
        results = swap_many(rig, worker=False, rounds=8)
        assert rig.swapper.stats.last["classifier"].mode == "cold"
        assert [r for r in results if r[0] != 200] == []
    finally:
        rig.close()


def test_worker_process_swaps_start_a_new_worker_and_stop_the_old(rig: Rig) -> None:
    rig.swapper.swap(rig.candidate("classifier", "1", classifier(seed=1), worker=True))
    first = rig.registry.get("classifier")
    assert first is not None
    old_pid = first.model.pid  # type: ignore[attr-defined]
    rig.swapper.swap(rig.candidate("classifier", "2", classifier(seed=2), worker=True))
    now = rig.registry.get("classifier")
    assert now is not None
    assert now.model.pid != old_pid
    r = httpx.post(f"{rig.url}/v2/models/classifier/infer", json=BODY, timeout=30)
    assert r.status_code == 200
    assert r.json()["model_version"] == "2"
    assert not first.model._process.is_alive()  # type: ignore[attr-defined]


def test_failed_validation_keeps_the_old_version_serving_and_says_why(rig: Rig) -> None:
    rig.swapper.swap(rig.candidate("classifier", "1", classifier(seed=1)))
    wrong = reference_npz(classifier(seed=5))
    with pytest.raises(ValidationFailed, match="differs from the reference"):
        rig.swapper.swap(rig.candidate("classifier", "2", classifier(seed=2), reference=wrong))
    r = httpx.post(f"{rig.url}/v2/models/classifier/infer", json=BODY, timeout=30)
    assert r.status_code == 200
    assert r.json()["model_version"] == "1"
    assert rig.swapper.journal.get("classifier").active.version == "1"  # type: ignore[union-attr]
    assert rig.swapper.journal.get("classifier").pending is None
    good = reference_npz(classifier(seed=2))
    rig.swapper.swap(rig.candidate("classifier", "2", classifier(seed=2), reference=good))
    assert rig.registry.versions()["classifier"] == "2"
