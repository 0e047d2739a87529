"""The child process of :mod:`controller.analysis.reference_runner`: a model's reference outputs as
NPZ.

``python -m controller.analysis.reference_child MODEL OUT.npz [WARMUP.json [SAMPLE]] CPU_SECONDS``:
limits its own CPU time, runs the model in ONNX Runtime on seeded random inputs
(:func:`reference_npz`) shaped and filled as ``WARMUP.json`` says (``{"given": <WarmupSpec
JSON>}``), or on the sample inputs ``SAMPLE`` (an NPZ), and writes the NPZ to ``OUT.npz``.
``MODEL`` and ``SAMPLE`` are paths or ``fd:N``
(:class:`controller.analysis.bounded_child.InputFile`). Exit status 0: written; 1: the model
cannot be run for references, the reason on the last line of stderr; 3
(:data:`INPUTS_REFUSED_EXIT`): the same, because ONNX Runtime failed on the inputs tried.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from controller.analysis.bounded_child import first_line, limit_cpu, read_input, ready
from controller.analysis.reference_outputs import (
    InputsRefused,
    ReferenceOutputsError,
    read_sample,
    reference_npz,
)
from shared.warmup_inputs import WarmupSpec

INPUTS_REFUSED_EXIT = 3


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4, 5):
        usage = (
            "usage: python -m controller.analysis.reference_child MODEL OUT "
            "[WARMUP.json [SAMPLE]] CPU_SECONDS"
        )
        print(usage, file=sys.stderr)
        return 2
    model, out, cpu_seconds = argv[0], Path(argv[1]), int(argv[-1])
    limit_cpu(cpu_seconds)
    ready()
    try:
        warmup = json.loads(Path(argv[2]).read_text()) if len(argv) >= 4 else {}
        sample = read_sample(read_input(argv[3])) if len(argv) == 5 else None
        given = WarmupSpec.from_json(warmup.get("given"))
        npz = reference_npz(read_input(model), given=given, sample=sample)
    except MemoryError:
        print(
            "running the model needed more memory than the reference process may use "
            "(its inputs or outputs are too large): give smaller --shape values or upload "
            "reference outputs",
            file=sys.stderr,
        )
        return INPUTS_REFUSED_EXIT
    except (ReferenceOutputsError, OSError) as exc:
        print(first_line(exc), file=sys.stderr)
        return INPUTS_REFUSED_EXIT if isinstance(exc, InputsRefused) else 1
    partial = out.with_name(f".{out.name}.partial")
    partial.write_bytes(npz)
    os.replace(partial, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
