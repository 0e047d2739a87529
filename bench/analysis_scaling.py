"""Static delegate analysis time against graph size: chains of Identity nodes, 1k to 8k.

Each size is a model built with ``onnx.helper`` (nothing downloaded): one FP32 input, N Identity
nodes in a chain, one output. Timed: ``analyze_all``, the whole analysis the controller runs for a
pushed version (every TensorRT parser version of the table). A linear analysis gives a ratio
8k/1k near 8; a quadratic one near 64.

Usage: ``python bench/analysis_scaling.py [--sizes 1000 2000 4000 8000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import platform
import time

from onnx import TensorProto, helper

from controller.analysis.report import analyze_all


def identity_chain(nodes: int) -> bytes:
    """An ONNX model of ``nodes`` Identity nodes in a chain (the shape of the issue-19 probe)."""
    graph = helper.make_graph(
        [helper.make_node("Identity", [f"t{i}"], [f"t{i + 1}"]) for i in range(nodes)],
        "identity_chain",
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(f"t{nodes}", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data: bytes = model.SerializeToString()
    return data


def seconds(data: bytes, repeat: int) -> float:
    """The best of ``repeat`` runs of the full analysis of ``data``."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        analyze_all(data)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(
        f"# analysis scaling on {platform.processor() or platform.machine()}, python "
        f"{platform.python_version()}, best of {args.repeat}"
    )
    print(f"{'nodes':>8} {'bytes':>9} {'seconds':>9} {'ms/1k nodes':>12}")
    timings: dict[int, float] = {}
    for size in args.sizes:
        data = identity_chain(size)
        timings[size] = seconds(data, args.repeat)
        per_k = timings[size] / size * 1000 * 1000
        print(f"{size:>8} {len(data):>9} {timings[size]:>9.3f} {per_k:>12.1f}", flush=True)
    low, high = min(timings), max(timings)
    print(
        f"ratio {high // 1000}k/{low // 1000}k: {timings[high] / timings[low]:.1f} "
        f"(nodes x{high / low:.0f}; linear ~{high / low:.0f}, quadratic ~{(high / low) ** 2:.0f})"
    )


if __name__ == "__main__":
    main()
