"""CUDA side of the swap path: 1000 swaps, shared activation arena vs plain cudaMalloc/cudaFree.

Needs an NVIDIA GPU and libcudart (the TensorRT host's ctypes binding, agent/trt_host/cudart.py);
no TensorRT. Each "swap"
brings in an engine whose activation memory alternates between two sizes (and sometimes a
larger one), as a swap between model versions does:

- **arena**: ``ActivationArena.reserve(size)`` (agent/trt_host/arena.py): allocates only when
the
  size exceeds every one seen, in big steps;
- **plain** (baseline): ``cudaMalloc(size)`` for the new engine, then ``cudaFree`` of the old one,
  every swap (what STATIC execution contexts do).

Reported: device free memory before / after, reallocations, and time per swap. Usage:
``python bench/cuda_arena.py [--swaps 1000] [--mib 96,160,224] [--out bench/results]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from agent.trt_host.arena import ActivationArena, MiB
from agent.trt_host.cudart import CudaRuntime
from bench.provenance import Provenance

cuda = CudaRuntime()


def device_name() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - the name is only a label
        return "GPU 0"


def run_arena(sizes: list[int], swaps: int) -> dict[str, float]:
    free0, _ = cuda.mem_get_info()
    arena = ActivationArena(cuda, lanes=1)
    t0 = time.perf_counter()
    for i in range(swaps):
        arena.reserve(sizes[i % len(sizes)])
        with arena.lane():
            pass
    arena.synchronize()
    elapsed = time.perf_counter() - t0
    free_during, _ = cuda.mem_get_info()
    grows = arena.grows
    arena.close()
    free1, _ = cuda.mem_get_info()
    return {"free_before": free0, "free_during": free_during, "free_after": free1,
            "allocs": grows, "us_per_swap": 1e6 * elapsed / swaps}  # fmt: skip


def run_plain(sizes: list[int], swaps: int) -> dict[str, float]:
    free0, _ = cuda.mem_get_info()
    current = 0
    t0 = time.perf_counter()
    for i in range(swaps):
        new = cuda.malloc(sizes[i % len(sizes)])
        if current:
            cuda.free(current)
        current = new
    cuda.stream_synchronize(0)
    elapsed = time.perf_counter() - t0
    free_during, _ = cuda.mem_get_info()
    cuda.free(current)
    free1, _ = cuda.mem_get_info()
    return {"free_before": free0, "free_during": free_during, "free_after": free1,
            "allocs": swaps, "us_per_swap": 1e6 * elapsed / swaps}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--swaps", type=int, default=1000)
    parser.add_argument("--mib", default="96,160,96,160,224")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    provenance = Provenance()
    sizes = [int(m) * MiB for m in args.mib.split(",")]
    name = device_name()
    rows = {
        "arena": run_arena(sizes, args.swaps),
        "plain malloc/free": run_plain(sizes, args.swaps),
    }
    lines = [
        "| path | cudaMalloc calls | free before MiB | free after last swap MiB | "
        "free after release MiB | delta after release MiB | µs per swap |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, r in rows.items():
        lines.append(
            f"| {label} | {int(r['allocs'])} | {r['free_before'] / MiB:.0f} | "
            f"{r['free_during'] / MiB:.0f} | {r['free_after'] / MiB:.0f} | "
            f"{(r['free_after'] - r['free_before']) / MiB:+.0f} | {r['us_per_swap']:.1f} |"
        )
    text = "\n".join(lines)
    print(f"device: {name}\n{text}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cuda_arena.md").write_text(
        "# CUDA arena vs plain allocate/free\n\nWritten by `bench/cuda_arena.py`; each run "
        f"replaces this file. Device {name}; the baseline, in the same run: cudaMalloc/cudaFree "
        f"per swap.\n\n{provenance.block()}\n{text}\n"
    )


if __name__ == "__main__":
    main()
