"""A child for the confinement tests of :mod:`controller.analysis.bounded_child`:
``python -m tests.confined_child INPUT TRY_DIR FILE... CPU_SECONDS`` reads ``INPUT`` (an
``InputFile``), then tries to list ``TRY_DIR``, write a file there and read each ``FILE``, and
writes what it found to ``seen.json`` in its working directory: its working directory's
entries, whether Python runs isolated, its address-space limit, and per file the error (or
``done``)."""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

from controller.analysis.bounded_child import limit_cpu, read_input, ready


def _attempt(action: object) -> str:
    try:
        action()  # type: ignore[operator]
    except OSError as exc:
        return type(exc).__name__
    return "done"


def main(argv: list[str]) -> int:
    given, target, files, cpu_seconds = argv[0], Path(argv[1]), argv[2:-1], int(argv[-1])
    limit_cpu(cpu_seconds)
    ready()
    seen = {
        "cwd_entries": sorted(os.listdir(".")),
        "isolated": sys.flags.isolated,
        "address_space": resource.getrlimit(resource.RLIMIT_AS)[0],
        "input": read_input(given).decode(),
        "list_target": _attempt(lambda: os.listdir(target)),
        "write_target": _attempt(lambda: (target / "planted").write_text("x")),
        "reads": {name: _attempt(Path(name).read_bytes) for name in files},
    }
    Path("seen.json").write_text(json.dumps(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
