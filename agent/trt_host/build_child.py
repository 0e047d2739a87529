"""``<tensorrt python> -m agent.trt_host.build_child REQUEST.json``: one TensorRT build, then exit.

Started by the agent's build runner (agent/engines/build_runner.py) under the interpreter that
can ``import tensorrt``, so the builder's memory returns to the OS when it exits. The request is
plain JSON: ``{"source": ONNX path, "target": plan path, "options": {...}}`` (the options of
:func:`.backend_trt.build_options`). Progress goes to stdout as ``JETFLEET-PROGRESS <percent>
<message>`` lines (the agent's build protocol), TensorRT's own error lines to stderr, and the exit
status is 0, or 3 when the build failed.

Python 3.8 syntax; standard library, numpy and tensorrt only.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import List, Optional

PROGRESS_PREFIX = "JETFLEET-PROGRESS "
EXIT_BUILD_FAILED = 3


def report(percent: float, message: str) -> None:
    print("%s%.1f %s" % (PROGRESS_PREFIX, percent, message), flush=True)


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m agent.trt_host.build_child REQUEST.json", file=sys.stderr)
        return 2
    with open(args[0], "rb") as f:
        request = json.loads(f.read().decode("utf-8"))
    try:
        try:
            import tensorrt as trt
        except ImportError as exc:
            print(
                "TensorRT not importable by %s (%s): install JetPack's python3-libnvinfer"
                % (sys.executable, exc),
                file=sys.stderr,
            )
            return EXIT_BUILD_FAILED
        from .backend_trt import run_build
        from .build import BuildError
        from .versions import Capabilities, UnsupportedTensorRT

        try:
            caps = Capabilities.for_version(str(trt.__version__))
            info = run_build(
                trt, caps, request["source"], request["target"], request["options"], report
            )
        except BuildError as exc:
            for line in exc.lines:
                print(line, file=sys.stderr, flush=True)
            return EXIT_BUILD_FAILED
        except UnsupportedTensorRT as exc:
            print(str(exc), file=sys.stderr, flush=True)
            return EXIT_BUILD_FAILED
        for note in info["notes"]:
            report(100.0, "note: " + note)
    except Exception:  # noqa: BLE001 - the child's last word goes to the agent verbatim
        traceback.print_exc(file=sys.stderr)
        return EXIT_BUILD_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
