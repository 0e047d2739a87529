"""TensorRT through the agent's TensorRT host versus TensorRT called directly, on a real GPU.

Needs a machine where this interpreter imports ``tensorrt`` and a CUDA device answers (the H200
test host with a TensorRT from PyPI gives 8.5.2 or 8.6.0; a Jetson with JetPack's
python3-libnvinfer). One plan per row is built once (cuBLAS/cuDNN tactic sources off, as on the
H200 host), then run two ways with the same input, alternating in blocks of 100 requests so drift
on a shared machine hits both:

* ``direct``: :class:`agent.trt_host.engine.Context` in this process: copy in, ``execute_async_v3``,
  copy out, stream synchronised (what a program that embeds TensorRT does);
* ``host``: the agent's path, :func:`agent.runtimes.loading.load_engine` ("tensorrt"): the input
  goes into the model's /dev/shm region, one frame over the socketpair, the host runs the same
  plan on its arena lane and answers with one frame; the agent copies the outputs out.

Outputs of the two paths are compared (equal to 1e-5) before timing. Reported per row: p50/p99 of
each path, what the host adds at p50/p99 and the p50 ratio. Goal: <= 0.3 ms added at
p50, as for the CPU transport (bench/host_overhead.py).

Usage: ``JETFLEET_TENSORRT_PYTHON=$(command -v python3) python -m bench.trt_host_gpu
[--requests 2000] [--out bench/results]`` (writes ``trt_host_gpu-<tensorrt version>.md``).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from agent.runtimes.loading import load_engine
from agent.trt_host import cudart
from agent.trt_host.build import BuildOptions, build
from agent.trt_host.engine import load
from agent.trt_host.versions import Capabilities
from bench.host_overhead import BLOCK, classifier_224, measure, pooling_model, row_lines
from bench.provenance import Provenance

NO_LIBRARIES = ("CUBLAS", "CUBLAS_LT", "CUDNN")
Row = tuple[str, float, float, float, float]


def run(requests: int) -> tuple[str, str, list[Row]]:
    import tensorrt as trt

    caps = Capabilities.for_version(trt.__version__)
    cuda = cudart.CudaRuntime()
    image = np.random.default_rng(0).standard_normal((1, 3, 224, 224), dtype=np.float32)
    feeds = {"image": image}
    rows: list[Row] = []
    models = (
        ("GlobalAveragePool 1x3x224x224", pooling_model(), "fp32"),
        ("demo CNN 1x3x224x224 fp32", classifier_224(), "fp32"),
        ("demo CNN 1x3x224x224 fp16", classifier_224(), "fp16"),
    )
    with tempfile.TemporaryDirectory() as scratch:
        for label, onnx, precision in models:
            options = BuildOptions(precision=precision, disabled_tactic_sources=NO_LIBRARIES)
            plan = build(trt, caps, onnx, options).plan
            path = Path(scratch) / f"{precision}-{len(rows)}.engine"
            path.write_bytes(plan)
            engine = load(trt, caps, cuda, plan)
            context = engine.context()
            remote = load_engine("tensorrt", path)
            try:
                ours, theirs = context.infer(feeds), remote.infer(feeds)
                for name, value in ours.items():
                    np.testing.assert_allclose(value, theirs[name], rtol=1e-5, atol=1e-5)
                paths: dict[str, Callable[[], object]] = {
                    "direct": partial(context.infer, feeds),
                    "host": partial(remote.infer, feeds),
                }
                measure(paths, 200)  # warm-up
                ms = measure(paths, requests)
                rows.append(
                    (
                        label,
                        float(np.percentile(ms["direct"], 50)),
                        float(np.percentile(ms["direct"], 99)),
                        float(np.percentile(ms["host"], 50)),
                        float(np.percentile(ms["host"], 99)),
                    )
                )
            finally:
                remote.close()
                context.close()
                engine.close()
    return str(trt.__version__), gpu_name(), rows


def gpu_name() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return str(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0)))
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - the table still prints without NVML
        return f"CUDA device 0 (NVML: {exc})"


def table(version: str, device: str, rows: list[Row], requests: int, provenance: Provenance) -> str:
    lines = [
        f"# TensorRT {version} through the TensorRT host vs direct",
        "",
        f"Written by `bench/trt_host_gpu.py`; each run replaces this file. {device}; {requests} "
        f"sequential requests per path, one client, blocks of {BLOCK} alternating; cuBLAS/cuDNN "
        "tactics off. The baseline, in the same run: the same plan called directly.",
        "",
        provenance.block(),
        *row_lines(rows, "direct"),
        "",
        "Goal: <= 0.3 ms added at p50.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    provenance = Provenance()
    version, device, rows = run(args.requests)
    text = table(version, device, rows, args.requests, provenance)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"trt_host_gpu-{version}.md").write_text(text)


if __name__ == "__main__":
    main()
