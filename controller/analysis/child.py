"""The child process of :mod:`controller.analysis.runner`: analyse one ONNX file, write JSON.

``python -m controller.analysis.child MODEL OUT.json CPU_SECONDS`` (``MODEL``: a path, or
``fd:N`` as :class:`controller.analysis.bounded_child.InputFile` hands it over): limits its own
CPU time to ``CPU_SECONDS`` (the kernel stops it past that, even when the controller that started
it is gone), runs the static analysis for every TensorRT version and writes the reports to
``OUT.json``. Exit status 0: written; 1: the model could not be analysed, the reason on the last
line of stderr.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path

from controller.analysis.bounded_child import first_line, limit_cpu, read_input, ready
from controller.analysis.report import analyze_all
from controller.errors import ControllerError


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m controller.analysis.child MODEL OUT CPU_SECONDS", file=sys.stderr)
        return 2
    model, out, cpu_seconds = argv[0], Path(argv[1]), int(argv[2])
    limit_cpu(cpu_seconds)
    ready()
    gc.disable()  # a short-lived process: the cycle collector only costs time (~30% at 32k nodes)
    try:
        reports = analyze_all(read_input(model))
    except MemoryError:
        print("the analysis needed more memory than its process may use", file=sys.stderr)
        return 1
    except (ControllerError, ValueError, OSError) as exc:
        print(first_line(exc), file=sys.stderr)
        return 1
    partial = out.with_name(f".{out.name}.partial")
    partial.write_text(json.dumps(reports), encoding="utf-8")
    os.replace(partial, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
