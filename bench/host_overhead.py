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
path, what the host adds at p50/p99 and the p50 ratio (goal: <= 0.3 ms added at p50); the
baseline is the in-process path of the same run. Usage:
``python bench/host_overhead.py [--requests 2000] [--out bench/results]``; each run replaces
``host_overhead.md``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.runtimes.host import HostConfig, TrtHost
from agent.runtimes.ort import load_ort
from bench.provenance import Provenance
from bench.results_file import ratio, write
from controller.demo.sample_models import IR_VERSION, OPSET, classifier

BLOCK = 100
POOL = "GlobalAveragePool 1x3x224x224"
CNN = "demo CNN 1x3x224x224"
Row = tuple[str, float, float, float, float]


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
    return bytes(model.SerializeToString())


def classifier_224() -> bytes:
    """The demo CNN (conv + global pooling) with its input made 1x3x224x224."""
    model = onnx.load_from_string(classifier())
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_value = 224
    dims[3].dim_value = 224
    return bytes(model.SerializeToString())


def measure(paths: Mapping[str, Callable[[], object]], requests: int) -> dict[str, np.ndarray]:
    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(max(requests // BLOCK, 1)):
        for name, call in paths.items():
            for _ in range(BLOCK):
                started = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - started)
    return {name: np.array(values) * 1000.0 for name, values in times.items()}


def run(requests: int) -> list[Row]:
    rows = []
    image = np.random.default_rng(0).standard_normal((1, 3, 224, 224), dtype=np.float32)
    with tempfile.TemporaryDirectory() as scratch:
        host = TrtHost(HostConfig()).start()
        try:
            for label, data in ((POOL, pooling_model()), (CNN, classifier_224())):
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


def row_lines(rows: list[Row], baseline: str) -> list[str]:
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


def summary_line(rows: list[Row], requests: int) -> str:
    """The ``host-overhead:`` line a reader quotes: the host against in-process, same run."""
    added50 = {label: host50 - in50 for label, in50, _, host50, _ in rows}
    added99 = {label: host99 - in99 for label, _, in99, _, host99 in rows}
    ratios = {label: ratio(host50, in50) for label, in50, _, host50, _ in rows}
    return (
        f"host-overhead: requests={requests} added_p50_ms={max(added50.values()):.3f} "
        f"added_p99_ms={max(added99.values()):.3f} pool_added_p50_ms={added50[POOL]:.3f} "
        f"cnn_added_p50_ms={added50[CNN]:.3f} pool_p50_ratio={ratios[POOL]:.2f}x "
        f"cnn_p50_ratio={ratios[CNN]:.2f}x (added_*: the larger of the 2 models; "
        f"goal added_p50_ms <= 0.3)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    provenance = Provenance()
    rows = run(args.requests)
    requests = max(args.requests // BLOCK, 1) * BLOCK
    text = "\n".join(row_lines(rows, "in-process"))
    summary = summary_line(rows, requests)
    print(f"{text}\n\n{summary}")
    write(
        args.out,
        "host_overhead.py",
        "TensorRT host transport overhead",
        f"A 1x3x224x224 request through the agent's TensorRT host process (ONNX Runtime CPU "
        f"backend standing in for TensorRT; tensors in /dev/shm, one frame each way over a "
        f"socketpair) against the baseline, the same runtime, model file and input called "
        f"in-process, in the same run: {requests} sequential requests per path, one client, "
        f"1 intra-op thread on both sides, the two paths alternating in blocks of {BLOCK} "
        f"(after 200 untimed each). Two models: a one-operator GlobalAveragePool, where the "
        f"transport is most of the time, and the demo CNN classifier. Goal: <= 0.3 ms added "
        f"at p50.",
        provenance,
        text,
        summary,
    )


if __name__ == "__main__":
    main()
