"""``python -m agent.trt_host --fd N --backend NAME --shm-prefix P``: run the host's loop.

Started by the agent (:mod:`agent.runtimes.host`), never by hand: fd ``N`` is the agent's end of
a socketpair. Python 3.8 syntax, standard library only.
"""

from __future__ import annotations

import argparse
import sys

from .server import BACKENDS, serve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.trt_host")
    parser.add_argument("--fd", type=int, required=True, help="the agent's socket")
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="tensorrt")
    parser.add_argument("--shm-prefix", required=True, help="name prefix of this host's regions")
    args = parser.parse_args(argv)
    return serve(args.fd, args.backend, args.shm_prefix)


if __name__ == "__main__":
    sys.exit(main())
