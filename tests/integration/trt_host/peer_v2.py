"""A stand-in TensorRT host from a future release: its hello speaks protocol 2.0.

Run by test_framing as ``HostConfig(module=...)``; accepts the real host's arguments.
"""

from __future__ import annotations

import argparse
import socket

from agent.trt_host import protocol as p


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--backend")
    parser.add_argument("--shm-prefix")
    args = parser.parse_args()
    sock = socket.socket(fileno=args.fd)
    sock.sendall(p.encode(p.Message(p.HELLO, 0, {"protocol": "2.0"}), major=2, minor=0))
    while sock.recv(4096):  # until the agent hangs up
        pass


if __name__ == "__main__":
    main()
