"""The agent's serving stack in a process of its own, for attacks that could kill it (SIGBUS).

``python -m tests.integration.agent.serving_process MODEL [UID...]``: serves MODEL (ONNX Runtime)
over KServe v2 with the shared-memory extension on (objects of the listed uids registrable
besides the agent's own), prints its port as one JSON line, and serves until stdin closes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agent.runtimes.ort import load_ort
from agent.serving.app import create_app
from agent.serving.core import ModelRegistry, ServedModel
from agent.serving.http_server import ServingServer
from agent.serving.prometheus import PromMetrics
from agent.serving.shared_memory import SharedMemoryRegions
from agent.telemetry.collectors.inference import HistogramMetrics


def main(argv: list[str]) -> None:
    registry = ModelRegistry()
    registry.swap(ServedModel("classifier", "1", "0" * 64, load_ort(Path(argv[0]))))
    regions = SharedMemoryRegions(owners=[int(u) for u in argv[1:]])
    app = create_app(
        registry,
        HistogramMetrics(),
        lambda: True,
        "test",
        shared_memory=regions,
        prometheus=PromMetrics(registry),  # as the daemon wires it: requests are counted
    )
    server = ServingServer(app, "127.0.0.1", 0)
    print(json.dumps({"port": server.start()}), flush=True)
    sys.stdin.read()
    server.stop()
    regions.close()


if __name__ == "__main__":
    main(sys.argv[1:])
