"""Serving overhead: agent HTTP (KServe v2) p50 against ONNX Runtime called in-process.

Same model (a MobileNetV2-like 1x3x224x224 classifier built in code, tests/analysis_models.py),
same input, same run, one client, sequential requests. The agent's serving stack (FastAPI +
uvicorn + the KServe v2 handlers) runs in its own process, as on a gateway; the client is the
bench process. Two HTTP encodings are measured (JSON tensors, the binary tensor data extension)
and two clients for the binary one (httpx, and the standard library's http.client, whose own cost
is lower: the difference is client time, not agent time). Reported: p50 / p99 per path and what
HTTP adds at p50 (goal: <= 1 ms with binary data). Usage:
``python bench/serving_overhead.py [--requests 300] [--out bench/results]``.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import multiprocessing
import platform
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import httpx
import numpy as np

from agent.metrics import Metrics
from agent.runtime_ort import load_ort
from agent.serving import ServingServer, create_app
from agent.serving_core import ModelRegistry, ServedModel
from tests.analysis_models import mobilenet_v2_like


def serve(path: str, ports: multiprocessing.Queue[int]) -> None:
    """The agent's serving stack over one model, in this (child) process until killed."""
    registry = ModelRegistry()
    registry.swap(ServedModel("m", "1", "0" * 64, load_ort(Path(path))))
    server = ServingServer(create_app(registry, Metrics(), lambda: True, "b"), "127.0.0.1", 0)
    ports.put(server.start())
    threading.Event().wait()


def timed(fn: Callable[[], object], n: int) -> list[float]:
    for _ in range(10):
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def uvicorn_http() -> str:
    """The HTTP parser uvicorn's ``http="auto"`` picks here."""
    return "httptools" if importlib.util.find_spec("httptools") else "h11"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3, help="Interleaved rounds per path.")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mobilenet.onnx"
        path.write_bytes(mobilenet_v2_like())
        model = load_ort(path)
        spec = model.inputs[0]
        image = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
        ctx = multiprocessing.get_context("spawn")
        ports: multiprocessing.Queue[int] = ctx.Queue()
        agent = ctx.Process(target=serve, args=(str(path), ports), daemon=True)
        agent.start()
        port = ports.get(timeout=60)
        url = f"http://127.0.0.1:{port}/v2/models/m/infer"
        tensor = {"name": spec.name, "shape": [1, 3, 224, 224], "datatype": "FP32"}
        json_body = {"inputs": [{**tensor, "data": image.ravel().tolist()}]}
        raw = image.astype("<f4").tobytes()
        header = json.dumps(
            {
                "inputs": [{**tensor, "parameters": {"binary_data_size": len(raw)}}],
                "parameters": {"binary_data_output": True},
            }
        ).encode()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        with httpx.Client(timeout=60) as client:

            def via_json() -> None:
                assert client.post(url, json=json_body).status_code == 200

            def via_binary() -> None:
                r = client.post(
                    url,
                    content=header + raw,
                    headers={"Inference-Header-Content-Length": str(len(header))},
                )
                assert r.status_code == 200

            def via_binary_stdlib() -> None:
                conn.request(
                    "POST",
                    "/v2/models/m/infer",
                    body=header + raw,
                    headers={
                        "Inference-Header-Content-Length": str(len(header)),
                        "Content-Type": "application/octet-stream",
                    },
                )
                response = conn.getresponse()
                response.read()
                assert response.status == 200

            paths: dict[str, tuple[Callable[[], object], int]] = {
                "ONNX Runtime in-process": (
                    lambda: model.infer({spec.name: image}),
                    args.requests,
                ),
                "agent HTTP, binary tensors, http.client": (via_binary_stdlib, args.requests),
                "agent HTTP, binary tensors, httpx": (via_binary, args.requests),
                "agent HTTP, JSON tensors, httpx": (via_json, max(10, args.requests // 10)),
            }
            # Interleaved rounds: a noisy neighbour slows every path alike, not just one.
            rows: dict[str, list[float]] = {name: [] for name in paths}
            for _ in range(args.rounds):
                for name, (fn, n) in paths.items():
                    rows[name] += timed(fn, max(1, n // args.rounds))
        conn.close()
        agent.kill()
        agent.join()
    base = float(np.percentile(rows["ONNX Runtime in-process"], 50))
    lines = ["| path | p50 ms | p99 ms | added at p50 ms |", "|---|---|---|---|"]
    for name, values in rows.items():
        p50, p99 = np.percentile(values, 50), np.percentile(values, 99)
        lines.append(f"| {name} | {p50:.2f} | {p99:.2f} | {p50 - base:+.2f} |")
    text = "\n".join(lines)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "serving_overhead.md").write_text(
        f"# Serving overhead ({datetime.now(timezone.utc):%Y-%m-%d})\n\n"
        f"`python bench/serving_overhead.py --requests {args.requests} --rounds {args.rounds}` "
        f"on {platform.node()} "
        f"({multiprocessing.cpu_count()} CPUs), ONNX Runtime CPU, MobileNetV2-like 1x3x224x224 "
        f"(tests/analysis_models.py), one sequential client, agent serving stack in its own "
        f"process (uvicorn HTTP parser: {uvicorn_http()}).\n\n{text}\n"
    )


if __name__ == "__main__":
    main()
