"""Dynamic batching over a real uvicorn and ONNX Runtime: merged requests, per-request outputs."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from agent.runtimes.ort import load_ort
from agent.serving.app import create_app
from agent.serving.batching import Batcher
from agent.serving.core import ModelRegistry, ServedModel
from agent.serving.http_server import ServingServer
from agent.telemetry.metrics import Metrics
from tests.ports import free_port

CLIENTS = 8


def dense(seed: int, batch: int | str = "N") -> bytes:
    """Y = X @ W + b with X of shape [batch, 16]: a model whose batch dim may be dynamic."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.normal(size=(16, 4)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(size=(4,)).astype(np.float32), "b")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["xw"]),
            helper.make_node("Add", ["xw", "b"], ["y"]),
        ],
        "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])],
        initializer=[w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def lookup() -> bytes:
    """Y = table[idx] (Gather) with idx of shape [N, 1]: an index out of range fails in ORT."""
    table = numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(4, 16), "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "idx"], ["y"], axis=0)],
        "lookup",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, ["N", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1, 16])],
        initializer=[table],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


class Rig:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.registry = ModelRegistry()
        self.batcher = Batcher()
        app = create_app(self.registry, Metrics(), lambda: True, "test", batcher=self.batcher)
        self.server = ServingServer(app, "127.0.0.1", free_port())
        self.url = f"http://127.0.0.1:{self.server.start()}"

    def serve(self, name: str, version: str, data: bytes) -> Path:
        path = self.tmp / f"{name}-{version}.onnx"
        path.write_bytes(data)
        old = self.registry.swap(ServedModel(name, version, "0" * 64, load_ort(path)))
        if old is not None:
            old.drain_and_close()
        return path

    def metrics(self) -> str:
        return httpx.get(f"{self.url}/metrics", timeout=10).text

    def close(self) -> None:
        self.server.stop()
        self.registry.close_all()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    try:
        yield r
    finally:
        r.close()


def body(x: np.ndarray) -> dict[str, Any]:
    return {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                        "data": x.reshape(-1).tolist()}]}  # fmt: skip


def direct(path: Path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(["y"], {"x": x})[0])


def concurrently(work: Callable[[int], Any], n: int = CLIENTS) -> list[Any]:
    """Run ``work(i)`` in ``n`` threads released together; their results (or exceptions)."""
    results: list[Any] = [None] * n
    gate = threading.Barrier(n)

    def run(i: int) -> None:
        gate.wait()
        try:
            results[i] = work(i)
        except Exception as exc:  # reported by the caller's asserts
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def metric(text: str, name: str, **labels: str) -> float:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    found = re.search(rf"^{re.escape(name)}\{{{re.escape(inner)}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def test_concurrent_clients_are_batched_and_each_gets_its_own_outputs(rig: Rig) -> None:
    path = rig.serve("dense", "1", dense(1))
    rig.batcher.configure("dense", max_batch_size=8, max_queue_delay_ms=50)
    rng = np.random.default_rng(0)
    inputs = [rng.normal(size=(1 + i % 2, 16)).astype(np.float32) for i in range(CLIENTS)]

    def client(i: int) -> np.ndarray:
        with httpx.Client(base_url=rig.url, timeout=30) as http:
            got = []
            for _ in range(5):
                r = http.post("/v2/models/dense/infer", json=body(inputs[i]))
                assert r.status_code == 200, r.text
                out = r.json()["outputs"][0]
                got.append(np.array(out["data"], np.float32).reshape(out["shape"]))
            return np.stack(got)

    results = concurrently(client)
    for x, got in zip(inputs, results, strict=True):
        assert not isinstance(got, Exception), got
        for each in got:
            np.testing.assert_allclose(each, direct(path, x), rtol=1e-5, atol=1e-5)
    text = rig.metrics()
    batches = metric(text, "jetfleet_batches_total", model="dense")
    singles = metric(text, "jetfleet_batch_size_bucket", model="dense", le="1")
    assert batches > 0
    assert singles < batches, "no batch merged more than one row"
    assert batches < CLIENTS * 5, "every request ran alone"


def test_a_model_with_a_static_batch_dimension_is_never_batched(rig: Rig) -> None:
    path = rig.serve("static", "1", dense(2, batch=1))
    rig.batcher.configure("static", max_batch_size=8, max_queue_delay_ms=50)
    x = np.ones((1, 16), np.float32)

    def client(_: int) -> list[float]:
        r = httpx.post(f"{rig.url}/v2/models/static/infer", json=body(x), timeout=30)
        assert r.status_code == 200, r.text
        return list(r.json()["outputs"][0]["data"])

    for got in concurrently(client):
        assert not isinstance(got, Exception), got
        np.testing.assert_allclose(got, direct(path, x).reshape(-1), rtol=1e-5)
    assert metric(rig.metrics(), "jetfleet_batches_total", model="static") == 0


def test_a_failing_batch_fails_only_its_requests_with_the_reason(rig: Rig) -> None:
    rig.serve("lookup", "1", lookup())
    dense_path = rig.serve("dense", "1", dense(3))
    rig.batcher.configure("lookup", max_batch_size=8, max_queue_delay_ms=300)
    rig.batcher.configure("dense", max_batch_size=8, max_queue_delay_ms=20)
    x = np.ones((1, 16), np.float32)

    def idx(i: int) -> dict[str, Any]:
        return {"inputs": [{"name": "idx", "shape": [1, 1], "datatype": "INT64", "data": [i]}]}

    def client(i: int) -> httpx.Response:
        if i % 2 == 0:
            return httpx.post(f"{rig.url}/v2/models/dense/infer", json=body(x), timeout=30)
        # client 1 asks for row 9 of a 4-row table; 3, 5 and 7 ask for valid rows
        return httpx.post(f"{rig.url}/v2/models/lookup/infer", json=idx(9 if i == 1 else 1))

    responses = concurrently(client)
    for r in responses[1::2]:  # the whole lookup batch fails: 400, the input was refused
        assert r.status_code == 400, r.text
        assert "the model refused the input" in r.json()["error"]
        assert "indices element out of data bounds" in r.json()["error"]
    for r in responses[0::2]:
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(
            r.json()["outputs"][0]["data"], direct(dense_path, x).reshape(-1), rtol=1e-5
        )
    alone = httpx.post(f"{rig.url}/v2/models/lookup/infer", json=idx(2), timeout=30)
    assert alone.status_code == 200, alone.text
    assert alone.json()["outputs"][0]["data"] == list(range(32, 48))


def test_batches_survive_swaps_without_a_failed_request(rig: Rig) -> None:
    paths = {"1": rig.serve("dense", "1", dense(1))}
    paths["2"] = rig.tmp / "dense-2.onnx"
    paths["2"].write_bytes(dense(2))
    rig.batcher.configure("dense", max_batch_size=8, max_queue_delay_ms=5)
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
    expected = {v: direct(p, x).reshape(-1) for v, p in paths.items()}
    stop = threading.Event()
    seen: list[tuple[int, str, list[float]]] = []
    lock = threading.Lock()

    def client(_: int) -> None:
        with httpx.Client(base_url=rig.url, timeout=30) as http:
            while not stop.is_set():
                r = http.post("/v2/models/dense/infer", json=body(x))
                with lock:
                    seen.append((r.status_code, r.json().get("model_version", ""),
                                 r.json().get("outputs", [{}])[0].get("data", [])))  # fmt: skip

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()

    def answered(at_least: int) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with lock:
                if len(seen) >= at_least:
                    return
            stop.wait(0.01)
        raise AssertionError(f"fewer than {at_least} answers in 30 s")

    try:
        answered(CLIENTS)
        for n in range(6):
            version = "2" if n % 2 == 0 else "1"
            entry = ServedModel("dense", version, "0" * 64, load_ort(paths[version]))
            old = rig.registry.swap(entry)
            assert old is not None
            assert old.drain_and_close(10)
            answered(len(seen) + CLIENTS)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert seen
    assert metric(rig.metrics(), "jetfleet_batches_total", model="dense") > 0
    for status, version, data in seen:
        assert status == 200
        np.testing.assert_allclose(data, expected[version], rtol=1e-5)
