"""The child process of :mod:`controller.analysis.reference_runner`: a model's reference outputs as
NPZ.

``python -m controller.analysis.reference_child MODEL.onnx OUT.npz CPU_SECONDS``: limits its own
CPU time,
runs the model in ONNX Runtime on seeded random inputs (:func:`reference_npz`) and writes the NPZ
to ``OUT.npz``. Exit status 0: written; 1: the model cannot be run for references, the reason on
the last line of stderr.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from controller.analysis.bounded_child import first_line, limit_cpu
from controller.analysis.reference_outputs import ReferenceOutputsError, reference_npz


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        usage = "usage: python -m controller.analysis.reference_child MODEL OUT CPU_SECONDS"
        print(usage, file=sys.stderr)
        return 2
    model, out, cpu_seconds = Path(argv[0]), Path(argv[1]), int(argv[2])
    limit_cpu(cpu_seconds)
    try:
        npz = reference_npz(model.read_bytes())
    except (ReferenceOutputsError, OSError) as exc:
        print(first_line(exc), file=sys.stderr)
        return 1
    partial = out.with_name(f".{out.name}.partial")
    partial.write_bytes(npz)
    os.replace(partial, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
