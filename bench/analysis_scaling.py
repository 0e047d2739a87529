"""Static delegate analysis time against graph size: chains of Identity nodes, 1k to 8k.

Each size is a model built with ``onnx.helper`` (nothing downloaded): one FP32 input, N Identity
nodes in a chain, one output. Timed: ``analyze_all``, the whole analysis the controller runs for a
pushed version (every TensorRT parser version of the table), best of ``--repeat`` runs per size.
The baseline is the smallest chain of the same run: a linear analysis gives a time ratio
largest/smallest near the node ratio (8 for 8k/1k) and the same time per node at both ends; a
quadratic one near the node ratio squared (64).

Usage: ``python bench/analysis_scaling.py [--sizes 1000 2000 4000 8000] [--repeat 3]
[--out bench/results]``; each run replaces ``analysis_scaling.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.provenance import Provenance
from bench.results_file import ratio, write
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


def short(nodes: int) -> str:
    """``8k`` for 8000 nodes, ``250`` for 250."""
    return f"{nodes // 1000}k" if nodes % 1000 == 0 else str(nodes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    provenance = Provenance()
    lines = [
        f"| nodes | bytes | seconds (best of {args.repeat}) | ms per 1k nodes |",
        "|---:|---:|---:|---:|",
    ]
    print(lines[0], lines[1], sep="\n", flush=True)
    analyze_all(identity_chain(10))  # first-call costs (imports, caches) are not the baseline's
    timings: dict[int, float] = {}
    for size in sorted(set(args.sizes)):
        data = identity_chain(size)
        timings[size] = seconds(data, args.repeat)
        lines.append(
            f"| {size:,} | {len(data):,} | {timings[size]:.3f} | {timings[size] / size * 1e6:.1f} |"
        )
        print(lines[-1], flush=True)
    low, high = min(timings), max(timings)
    nodes_x = high / low
    time_x = ratio(timings[high], timings[low])
    per_node_x = ratio(timings[high] / high, timings[low] / low)
    lines.append(
        f"| ratio {short(high)}/{short(low)} | | **{time_x:.1f}** (nodes x{nodes_x:g}: linear "
        f"~{nodes_x:g}, quadratic ~{nodes_x**2:g}) | {per_node_x:.2f} (linear ~1, quadratic "
        f"~{nodes_x:g}) |"
    )
    print(lines[-1])
    summary = (
        f"analysis-scaling: nodes={high} seconds={timings[high]:.3g} "
        f"ratio_{short(high)}_{short(low)}={time_x:.1f} per_node_ratio={per_node_x:.2f} "
        f"(linear: ~{nodes_x:g} and ~1, quadratic: ~{nodes_x**2:g} and ~{nodes_x:g})"
    )
    print(f"\n{summary}")
    write(
        args.out,
        "analysis_scaling.py",
        "Static analysis scaling",
        f"Timed: `analyze_all` (what the controller runs for each pushed version: every TensorRT "
        f"parser version of the table) on chains of N Identity nodes built with `onnx.helper`, "
        f"best of {args.repeat} runs per size. The baseline is the smallest chain of this run "
        f"({low:,} nodes): a linear analysis takes about {nodes_x:g}x its time at {high:,} nodes "
        f"(the same time per node), a quadratic one about {nodes_x**2:g}x.",
        provenance,
        "\n".join(lines),
        summary,
    )


if __name__ == "__main__":
    main()
