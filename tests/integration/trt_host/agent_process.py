"""A minimal agent for the kill -9 tests: starts a host, serves one request, then waits.

``python -m tests.integration.trt_host.agent_process MODEL``: prints one JSON line
(``{"host_pid": ..., "prefix": ...}``) once the request has been answered, then blocks on stdin
until it is killed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from agent.runtimes.host import HostConfig, TrtHost


def main() -> None:
    host = TrtHost(HostConfig()).start()
    model = host.load(Path(sys.argv[1]))
    model.infer({"image": np.ones((1, 3, 32, 32), np.float32)})
    print(json.dumps({"host_pid": host.pid, "prefix": host.shm_prefix}), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
