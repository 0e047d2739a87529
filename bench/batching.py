"""Dynamic batching: throughput at 8 concurrent clients with batching off and on, same run.

The agent side (serving core, KServe v2 on uvicorn, :class:`agent.serving.batching.Batcher`) runs in
this process; the load comes from a second process (``--clients`` threads over HTTP, binary
tensors, one row each). The model is an MLP whose batch dimension is dynamic (X of shape
[N, 2048], four 2048x2048 MatMul+Relu layers, 64 MiB of weights): one row is a matrix-vector
product bound by memory bandwidth, so merging rows reads the weights once for many requests.
Reported per run: requests per second, p50/p99 latency, batches run and mean rows per batch; the
baseline is the run with batching off, in the same process, and the summary line gives the
batched run's throughput and latency as ratios of it. Usage:
``python bench/batching.py [--clients 8] [--seconds 10] [--batch 8] [--delay-ms 2]
[--out bench/results]``; each run replaces ``batching.md``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.runtimes.ort import load_ort
from agent.serving.app import create_app
from agent.serving.batching import Batcher
from agent.serving.core import ModelRegistry, ServedModel
from agent.serving.http_server import ServingServer
from agent.telemetry.metrics import Metrics
from bench.provenance import Provenance
from bench.results_file import ratio, write

WIDTH = 2048
LAYERS = 4


def mlp(seed: int = 0) -> bytes:
    """X [N, WIDTH] → LAYERS x (MatMul, Relu) → Y [N, WIDTH]."""
    rng = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "x"
    for i in range(LAYERS):
        w = (rng.normal(size=(WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        out = "y" if i == LAYERS - 1 else f"h{i}"
        nodes += [
            helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]),
            helper.make_node("Relu", [f"m{i}"], [out]),
        ]
        prev = out
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", WIDTH])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def request() -> tuple[bytes, dict[str, str]]:
    """A binary-tensor infer request of one row; the output comes back binary too."""
    raw = np.full((1, WIDTH), 0.25, np.float32).tobytes()
    head = json.dumps(
        {
            "inputs": [
                {"name": "x", "shape": [1, WIDTH], "datatype": "FP32",
                 "parameters": {"binary_data_size": len(raw)}}
            ],
            "parameters": {"binary_data_output": True},
        }
    ).encode()  # fmt: skip
    return head + raw, {"Inference-Header-Content-Length": str(len(head))}


def client_process(url: str, clients: int, seconds: float, out: Any) -> None:
    """The load generator (a separate process): ``clients`` threads for ``seconds``."""
    body, headers = request()
    latencies: list[float] = []
    failed = 0
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def run() -> None:
        nonlocal failed
        with httpx.Client(base_url=url, timeout=60) as http:
            while time.monotonic() < end:
                t0 = time.monotonic()
                ok = http.post("/v2/models/mlp/infer", content=body, headers=headers).is_success
                with lock:
                    if ok:
                        latencies.append(time.monotonic() - t0)
                    else:
                        failed += 1

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put((latencies, failed))


def one_run(
    label: str, batch: int, delay_ms: float, args: argparse.Namespace, path: Path
) -> dict[str, Any]:
    registry = ModelRegistry()
    batcher = Batcher()
    batcher.configure("mlp", max_batch_size=batch, max_queue_delay_ms=delay_ms)
    registry.swap(ServedModel("mlp", "1", "0" * 64, load_ort(path)))
    app = create_app(registry, Metrics(), lambda: True, "bench", batcher=batcher)
    server = ServingServer(app, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.start()}"
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=client_process, args=(url, args.clients, args.seconds, out))
    proc.start()
    latencies, failed = out.get(timeout=args.seconds + 120)
    proc.join()
    metrics = httpx.get(f"{url}/metrics").text
    server.stop()
    registry.close_all()

    def value(name: str) -> float:
        found = re.search(rf'^{name}{{model="mlp"}} (\S+)$', metrics, re.M)
        return float(found.group(1)) if found else 0.0

    batches = value("jetfleet_batches_total")
    return {
        "run": label,
        "requests": len(latencies),
        "failed": failed,
        "req_per_s": len(latencies) / args.seconds,
        "p50_ms": float(np.percentile(latencies, 50)) * 1000 if latencies else float("nan"),
        "p99_ms": float(np.percentile(latencies, 99)) * 1000 if latencies else float("nan"),
        "batches": int(batches),
        "rows_per_batch": value("jetfleet_batch_size_sum") / batches if batches else 1.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--delay-ms", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    provenance = Provenance()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mlp.onnx"
        path.write_bytes(mlp())
        rows = [
            one_run("batching off", 1, 0, args, path),
            one_run(
                f"batching on ({args.batch}, {args.delay_ms:g} ms)",
                args.batch,
                args.delay_ms,
                args,
                path,
            ),
        ]
    table = ["| run | requests | failed | req/s | p50 ms | p99 ms | batches | rows/batch |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        table.append(
            f"| {r['run']} | {r['requests']} | {r['failed']} | {r['req_per_s']:.1f} | "
            f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['batches']} | {r['rows_per_batch']:.2f} |"
        )
    text = "\n".join(table)
    summary = summary_line(args.clients, *rows)
    print(f"{text}\n\n{summary}")
    write(
        args.out,
        "batching.py",
        "Dynamic batching",
        f"{args.clients} concurrent client{'s' if args.clients > 1 else ''} (threads of a "
        "second process over HTTP, binary tensors, one row per request) for "
        f"{args.seconds:g} s per run against the agent's serving stack in this process: ONNX "
        "Runtime CPU (1 intra-op thread per inference), "
        f"MLP {LAYERS}x{WIDTH}x{WIDTH} with a dynamic batch dimension. The baseline is the run "
        f"with batching off, same process, same run; batching on merges up to {args.batch} rows "
        f"waiting at most {args.delay_ms:g} ms. The summary's ratios are batching on / off.",
        provenance,
        text,
        summary,
    )


def summary_line(clients: int, off: dict[str, Any], on: dict[str, Any]) -> str:
    """The ``batching:`` line a reader quotes: batching on as ratios of off, same run."""
    return (
        f"batching: clients={clients} "
        f"req_per_s_ratio={ratio(on['req_per_s'], off['req_per_s']):.2f}x "
        f"p50_ratio={ratio(on['p50_ms'], off['p50_ms']):.2f}x "
        f"p99_ratio={ratio(on['p99_ms'], off['p99_ms']):.2f}x "
        f"rows_per_batch={on['rows_per_batch']:.2f} failed={on['failed']} "
        f"failed_off={off['failed']}"
    )


if __name__ == "__main__":
    main()
