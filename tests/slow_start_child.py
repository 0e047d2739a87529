"""A child for :mod:`controller.analysis.bounded_child` tests: ``python -m tests.slow_start_child
START_S WORK_S CPU_SECONDS`` sleeps ``START_S`` before it calls ``ready()`` (a slow import, as
ONNX Runtime's on a loaded host), then ``WORK_S`` (its work), prints ``done`` to stderr, exits 0."""

from __future__ import annotations

import sys
import time

from controller.analysis.bounded_child import limit_cpu, ready


def main(argv: list[str]) -> int:
    start_s, work_s, cpu_seconds = float(argv[0]), float(argv[1]), int(argv[2])
    print("a library's banner on standard output")  # skipped by the parent
    sys.stdout.flush()
    time.sleep(start_s)
    limit_cpu(cpu_seconds)
    ready()
    print("printed after ready() goes nowhere")
    time.sleep(work_s)
    print("done", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
