"""A builder child that writes half an engine and then crashes with a real SIGSEGV, as TensorRT's
builder did on a public opset-18 model: reads address 0 through ctypes."""

from __future__ import annotations

import ctypes
import faulthandler
import sys

from agent.engines.build_protocol import BuildRequest, Progress, child_main


def build(request: BuildRequest, progress: Progress) -> None:
    request.output_path.write_bytes(b"half an engine")
    progress(40, "building, then crashing")
    faulthandler.disable()  # the crash as a native builder's: no Python traceback
    ctypes.string_at(0)


if __name__ == "__main__":
    sys.exit(child_main(build, sys.argv))
