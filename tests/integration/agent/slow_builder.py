"""A builder child that reports progress and then never finishes (for the timeout test).

It writes its pid next to its output so the test can check the process is gone after the kill.
"""

from __future__ import annotations

import os
import sys
import threading

from agent.engines.build_protocol import BuildRequest, Progress, child_main


def build(request: BuildRequest, progress: Progress) -> None:
    request.output_path.with_suffix(".pid").write_text(str(os.getpid()))
    progress(10, "started, will hang")
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(child_main(build, sys.argv))
