"""TensorRT host transport overhead: a 1x3x224x224 request through the host versus in-process.

Same runtime (ONNX Runtime, CPU provider, one intra-op thread on both sides), same model file,
same input, same run. "in-process" calls :func:`agent.runtimes.ort.load_ort`'s model directly;
"host" goes through :class:`agent.runtimes.host.TrtHost` with the CPU backend: the input is
written into the model's /dev/shm region, one request frame goes over the socketpair, the host
runs ONNX Runtime on a view of the region, writes the outputs into its region, answers with one
frame, and the agent copies the outputs out. Two models: a one-operator model
(GlobalAveragePool over the image, ~0.1 ms of ONNX Runtime) where the transport's cost is most
of the time, and the demo CNN classifier at 224x224. Measurements alternate in blocks of 100
requests between the two paths so drift on a shared machine hits both. Reported: p50/p99 per
path, what the host adds at p50/p99 and the p50 ratio (goal: <= 0.3 ms added at p50).
Usage: ``python bench/host_overhead.py [--requests 2000] [--out bench/results]``.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from agent.runtimes.host import HostConfig, TrtHost
from agent.runtimes.ort import load_ort
from controller.demo.sample_models import IR_VERSION, OPSET, classifier

BLOCK = 100


def pooling_model() -> bytes:
    """One GlobalAveragePool over a 1x3x224x224 image: the transport dominates."""
    graph = helper.make_graph(
        [helper.make_node("GlobalAveragePool", ["image"], ["pooled"])],
        "pool",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, 3, 1, 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model.SerializeToString()


def classifier_224() -> bytes:
    """The demo CNN (conv + global pooling) with its input made 1x3x224x224."""
    model = onnx.load_from_string(classifier())
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_value = 224
    dims[3].dim_value = 224
    return model.SerializeToString()


def measure(paths: dict[str, Callable[[], object]], requests: int) -> dict[str, np.ndarray]:
    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(max(requests // BLOCK, 1)):
        for name, call in paths.items():
            for _ in range(BLOCK):
                started = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - started)
    return {name: np.array(values) * 1000.0 for name, values in times.items()}


def run(requests: int) -> list[tuple[str, float, float, float, float]]:
    rows = []
    image = np.random.default_rng(0).standard_normal((1, 3, 224, 224), dtype=np.float32)
    with tempfile.TemporaryDirectory() as scratch:
        host = TrtHost(HostConfig()).start()
        try:
            for label, data in (
                ("GlobalAveragePool 1x3x224x224", pooling_model()),
                ("demo CNN 1x3x224x224", classifier_224()),
            ):
                path = Path(scratch) / "model.onnx"
                path.write_bytes(data)
                local = load_ort(path, intra_op_threads=1)
                remote = host.load(path, {"intra_op_threads": 1})
                feeds = {"image": image}
                ours, theirs = local.infer(feeds), remote.infer(feeds)
                for name, value in ours.items():
                    np.testing.assert_array_equal(value, theirs[name])
                paths = {"in": partial(local.infer, feeds), "host": partial(remote.infer, feeds)}
                measure(paths, 200)  # warm-up
                ms = measure(paths, requests)
                rows.append(
                    (
                        label,
                        float(np.percentile(ms["in"], 50)),
                        float(np.percentile(ms["in"], 99)),
                        float(np.percentile(ms["host"], 50)),
                        float(np.percentile(ms["host"], 99)),
                    )
                )
                remote.close()
                local.close()
        finally:
            host.close()
    return rows


def table(rows: list[tuple[str, float, float, float, float]], requests: int) -> str:
    lines = [
        f"# TensorRT host transport overhead ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)",
        "",
        f"{platform.node()}: {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}; {requests} sequential requests per path, one client, "
        "ONNX Runtime CPU provider, 1 intra-op thread on both sides; blocks of "
        f"{BLOCK} alternating. Command: `python bench/host_overhead.py --requests {requests}`.",
        "",
        *row_lines(rows, "in-process"),
        "",
        "Goal: <= 0.3 ms added at p50 over shared memory.",
    ]
    return "\n".join(lines) + "\n"


def row_lines(rows: list[tuple[str, float, float, float, float]], baseline: str) -> list[str]:
    """Markdown rows of (label, baseline p50/p99, host p50/p99) and what the host adds."""
    lines = [
        f"| model | {baseline} p50 ms | {baseline} p99 ms | host p50 ms | host p99 ms "
        "| added p50 ms | added p99 ms | p50 ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, in50, in99, host50, host99 in rows:
        lines.append(
            f"| {label} | {in50:.3f} | {in99:.3f} | {host50:.3f} | {host99:.3f} "
            f"| {host50 - in50:.3f} | {host99 - in99:.3f} | {host50 / in50:.2f}x |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    text = table(run(args.requests), args.requests)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "host_overhead.md").write_text(text)


if __name__ == "__main__":
    main()
