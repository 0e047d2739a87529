"""Serving overhead: agent HTTP (KServe v2) p50 against ONNX Runtime called in-process.

Same model (a MobileNetV2-like 1x3x224x224 classifier built in code, tests/analysis_models.py),
same input, same run, one client, sequential requests. Two HTTP encodings are measured: JSON
tensors and the binary tensor data extension. Reported: p50 / p99 per path and what HTTP adds
at p50 (goal: <= 1 ms with binary data). Usage:
``python bench/serving_overhead.py [--requests 300] [--out bench/results]``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import tempfile
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


def timed(fn: Callable[[], object], n: int) -> list[float]:
    for _ in range(10):
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mobilenet.onnx"
        path.write_bytes(mobilenet_v2_like())
        model = load_ort(path)
        spec = model.inputs[0]
        image = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
        registry = ModelRegistry()
        registry.swap(ServedModel("m", "1", "0" * 64, load_ort(path)))
        server = ServingServer(create_app(registry, Metrics(), lambda: True, "b"), "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.start()}/v2/models/m/infer"
        tensor = {"name": spec.name, "shape": [1, 3, 224, 224], "datatype": "FP32"}
        json_body = {"inputs": [{**tensor, "data": image.ravel().tolist()}]}
        raw = image.astype("<f4").tobytes()
        header = json.dumps(
            {
                "inputs": [{**tensor, "parameters": {"binary_data_size": len(raw)}}],
                "parameters": {"binary_data_output": True},
            }
        ).encode()
        with httpx.Client(timeout=60) as http:

            def via_json() -> None:
                assert http.post(url, json=json_body).status_code == 200

            def via_binary() -> None:
                r = http.post(
                    url,
                    content=header + raw,
                    headers={"Inference-Header-Content-Length": str(len(header))},
                )
                assert r.status_code == 200

            rows = {
                "ONNX Runtime in-process": timed(
                    lambda: model.infer({spec.name: image}), args.requests
                ),
                "agent HTTP, binary tensors": timed(via_binary, args.requests),
                "agent HTTP, JSON tensors": timed(via_json, args.requests),
            }
        server.stop()
        registry.close_all()
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
        f"`python bench/serving_overhead.py --requests {args.requests}` on {platform.node()} "
        f"({multiprocessing.cpu_count()} CPUs), ONNX Runtime CPU, MobileNetV2-like 1x3x224x224 "
        f"(tests/analysis_models.py), one sequential client.\n\n{text}\n"
    )


if __name__ == "__main__":
    main()
