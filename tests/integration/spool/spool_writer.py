"""A separate process that writes a spool, for the tests that kill it with SIGKILL.

``python -m tests.integration.spool.spool_writer PATH append-ack`` appends 50 entries, acks the
first 20, prints ``ready`` and waits; ``... PATH stream`` appends until killed and prints each
key once ``append`` has returned.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent.link.spool import Spool


def main() -> None:
    path, mode = Path(sys.argv[1]), sys.argv[2]
    spool = Spool(path)
    if mode == "append-ack":
        for i in range(50):
            spool.append("telemetry", f"sample {i}".encode(), f"k{i}")
        spool.ack([entry.id for entry in spool.peek(20)])
        print("ready", flush=True)
        sys.stdin.read()
    elif mode == "stream":
        i = 0
        while True:
            spool.append("telemetry", b"x" * 200, f"s{i}")
            print(f"s{i}", flush=True)
            i += 1
    else:
        raise SystemExit(f"unknown mode {mode!r}: use append-ack or stream")


if __name__ == "__main__":
    main()
