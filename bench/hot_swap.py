"""Hot swap under load: 200 swaps between two model versions while 4 HTTP clients send requests.

The agent side (serving core, hot-swapper, KServe v2 on uvicorn) runs in this process; the load
comes from a second process (4 client threads over HTTP). Two runs, same process, same model:

- **hotswap**: the agent's swap (admission → load standby → validate against the reference
  outputs → journal → atomic switch → drain → free);
- **naive** (baseline): unload the old version, then load the new one (what a plain reload does).

Reported per run: requests, failed requests, p50/p99 latency in steady state and during swaps,
the longest gap between two responses during the swap phase, and the agent's RSS after swap 10
and after the last swap. Usage:
``python bench/hot_swap.py [--swaps 200] [--clients 4] [--steady-s 5] [--out bench/results]``.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from agent.runtimes.ort import load_ort
from agent.serving.app import create_app
from agent.serving.core import ModelRegistry, ServedModel
from agent.serving.http_server import ServingServer
from agent.swap.admission import need_of
from agent.swap.headroom import HeadroomProbe
from agent.swap.hotswap import Candidate, HotSwapper
from agent.swap.journal import Pointer, SwapJournal
from agent.swap.validation import parse_reference
from agent.telemetry.metrics import Metrics
from bench.provenance import Provenance
from controller.analysis.reference_outputs import reference_npz
from controller.demo.sample_models import classifier

BODY = {
    "inputs": [{"name": "image", "shape": [1, 3, 32, 32], "datatype": "FP32", "data": [0.5] * 3072}]
}


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def client_process(url: str, clients: int, stop: Any, out: Any) -> None:
    """The load generator (a separate process): ``clients`` threads, results via ``out``."""
    records: list[tuple[float, float, int]] = []
    lock = threading.Lock()

    def run() -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            while not stop.is_set():
                t0 = time.monotonic()
                try:
                    status = http.post("/v2/models/classifier/infer", json=BODY).status_code
                except httpx.HTTPError:
                    status = -1
                with lock:
                    records.append((t0, time.monotonic(), status))

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(records)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def one_run(mode: str, swaps: int, clients: int, steady_s: float, tmp: Path) -> dict[str, Any]:
    paths, refs = {}, {}
    for v in ("1", "2"):
        data = classifier(seed=int(v))
        paths[v] = tmp / f"classifier-{v}.onnx"
        paths[v].write_bytes(data)
        refs[v] = parse_reference(reference_npz(data))
    registry = ModelRegistry()
    swapper = HotSwapper(registry, SwapJournal(tmp / mode), HeadroomProbe("cpu"), tmp)
    server = ServingServer(create_app(registry, Metrics(), lambda: True, "bench"), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.start()}"

    def candidate(v: str) -> Candidate:
        path = paths[v]
        return Candidate(
            "classifier", v, "0" * 64, lambda: load_ort(path), need_of(path.stat().st_size),
            Pointer(v, "0" * 64, str(path)), reference=refs[v],
        )  # fmt: skip

    def naive(v: str) -> None:
        old = registry.remove("classifier")
        if old is not None:
            old.drain_and_close()
        registry.swap(ServedModel("classifier", v, "0" * 64, load_ort(paths[v])))

    swapper.swap(candidate("1"))
    ctx = multiprocessing.get_context("spawn")
    stop, out = ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=client_process, args=(url, clients, stop, out))
    proc.start()
    time.sleep(1.0)  # clients connect and warm up; not a state wait
    steady_from = time.monotonic()
    time.sleep(steady_s)  # the steady-state window itself
    swap_from = time.monotonic()
    windows: list[tuple[float, float]] = []
    rss_at: dict[int, int] = {}
    for i in range(1, swaps + 1):
        v = "2" if i % 2 else "1"
        t0 = time.monotonic()
        if mode == "hotswap":
            swapper.swap(candidate(v))
        else:
            naive(v)
        windows.append((t0, time.monotonic()))
        if i in (10, swaps):
            rss_at[i] = rss()
    swap_to = time.monotonic()
    stop.set()
    records: list[tuple[float, float, int]] = out.get(timeout=120)
    proc.join(30)
    server.stop()
    registry.close_all()

    def during_swap(t0: float, t1: float) -> bool:
        return any(t0 <= w1 and t1 >= w0 for w0, w1 in windows)

    steady = [
        (t1 - t0) * 1000 for t0, t1, s in records if steady_from <= t0 < swap_from and s == 200
    ]
    swapping = [(t1 - t0) * 1000 for t0, t1, s in records if s == 200 and during_swap(t0, t1)]
    done = sorted(t1 for t0, t1, _ in records if swap_from <= t1 <= swap_to)
    gap = max((b - a for a, b in itertools.pairwise(done)), default=float("nan")) * 1000
    failed = sum(1 for _, _, s in records if s != 200)
    return {
        "mode": mode,
        "requests": len(records),
        "failed": failed,
        "steady_p50_ms": pct(steady, 50),
        "steady_p99_ms": pct(steady, 99),
        "swap_p50_ms": pct(swapping, 50),
        "swap_p99_ms": pct(swapping, 99),
        "longest_gap_ms": gap,
        "swap_mean_ms": 1000 * sum(b - a for a, b in windows) / len(windows),
        "rss_10_mib": rss_at.get(10, 0) / 2**20,
        "rss_last_mib": rss_at.get(swaps, 0) / 2**20,
    }


def table(rows: list[dict[str, Any]], swaps: int) -> str:
    head = (
        f"| run | requests | failed | steady p50 / p99 ms | during swaps p50 / p99 ms | "
        f"p99 ratio | longest gap ms | mean swap ms | RSS after swap 10 → {swaps} MiB (growth) |"
    )
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        growth = 100 * (r["rss_last_mib"] - r["rss_10_mib"]) / r["rss_10_mib"]
        lines.append(
            f"| {r['mode']} | {r['requests']} | {r['failed']} | "
            f"{r['steady_p50_ms']:.2f} / {r['steady_p99_ms']:.2f} | "
            f"{r['swap_p50_ms']:.2f} / {r['swap_p99_ms']:.2f} | "
            f"{r['swap_p99_ms'] / r['steady_p99_ms']:.2f}x | {r['longest_gap_ms']:.1f} | "
            f"{r['swap_mean_ms']:.1f} | {r['rss_10_mib']:.1f} → {r['rss_last_mib']:.1f} "
            f"({growth:+.2f} %) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--swaps", type=int, default=200)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--steady-s", type=float, default=5.0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    provenance = Provenance()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [
            one_run(mode, args.swaps, args.clients, args.steady_s, Path(tmp))
            for mode in ("hotswap", "naive")
        ]
    text = table(rows, args.swaps) + "\n\n" + summary(rows)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "hot_swap.md"
    if not results.exists():
        results.write_text(
            "# Hot swap under load\n\n"
            "Written by `bench/hot_swap.py`, one section per run, newest last. ONNX Runtime CPU, "
            "model `controller.demo.sample_models.classifier` (1x3x32x32), two versions (seeds 1 "
            "and 2), each swap validated against reference outputs; the clients are a second "
            "process of HTTP threads. The baseline, in the same run: a naive reload (unload, "
            "then load) under the same load. The p99 ratio is against the steady window of the "
            "same run, so it holds on a shared, noisy machine where absolute times do not.\n"
        )
    with results.open("a", encoding="utf-8") as fh:
        fh.write(
            f"\n## Run of {provenance.started:%Y-%m-%d %H:%M} UTC\n\n{provenance.block()}"
            f"- clients: {args.clients} threads, steady window {args.steady_s:g} s\n\n{text}\n"
        )


def summary(rows: list[dict[str, Any]]) -> str:
    """The ``hot-swap:`` line a reader (and docs/benchmarks.md) quotes."""
    hot, naive = (next(r for r in rows if r["mode"] == mode) for mode in ("hotswap", "naive"))

    def growth(r: dict[str, Any]) -> str:
        return f"{100 * (r['rss_last_mib'] - r['rss_10_mib']) / r['rss_10_mib']:+.2f}%"

    return (
        f"hot-swap: failed={hot['failed']} of {hot['requests']} (naive {naive['failed']} of "
        f"{naive['requests']}) p99_during_swaps={hot['swap_p99_ms'] / hot['steady_p99_ms']:.2f}x "
        f"steady rss_growth={growth(hot)} (naive {growth(naive)})"
    )


if __name__ == "__main__":
    main()
