"""Soak and chaos bench: a real fleet under a seeded fault schedule for M minutes.

Its own Mosquitto (restarted, taken down), its own PostgreSQL cluster (initdb in the work
directory, a free port on 127.0.0.1; stopped and started again; removed at the end),
``jetfleet serve`` on it (killed with -9 and restarted), N real agents as processes, each behind
a TCP proxy for its broker link (partitioned), with their state directories on small tmpfs
mounts (filled), agents killed with -9 mid-download and mid-swap; inference clients keep sending
and simulated gateways add load while a rollout, a rollback and redeploys happen. Outages keep
the issue's lengths at 30 minutes (broker down 60 s, partitions 120 s) and overlap the next
faults. Prints the schedule, then the measurements and the ``soak:`` line; writes
``<out>/soak.md``.

Usage: ``python bench/soak.py --minutes 30 [--agents 3] [--seed 1] [--out bench/results]
[--db postgresql+psycopg://...]`` (run as root for the full-disk fault; as root the cluster
runs as the ``postgres`` user). ``--db`` uses that server instead and never restarts it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.provenance import Provenance
from bench.soak.run import Config, Soak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", type=int, default=0, help="0: one per 90 s, at least 5")
    parser.add_argument("--sims", type=int, default=20, help="simulated gateways for load")
    parser.add_argument(
        "--db",
        default="",
        help="use this PostgreSQL database (a fresh one the bench may fill) instead of the "
        "run's own cluster; it is never restarted (postgresql_restart: not done)",
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    provenance = Provenance()
    scale = min(1.0, args.minutes / 30)
    cfg = Config(
        args.minutes, args.agents, args.seed, args.db, args.faults, scale, args.sims,
    )  # fmt: skip
    outcome = Soak(cfg).run()
    text = outcome.text()
    print(text)
    short = (
        f"**This is a {args.minutes:g}-minute run, not the 30-minute run the goals ask for.**\n\n"
        if args.minutes < 30
        else ""
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "soak.md").write_text(
        f"# Soak ({provenance.started:%Y-%m-%d %H:%M} UTC)\n\n"
        f"Written by `bench/soak.py`; each run replaces this file.\n\n{provenance.block()}\n"
        f"{'PostgreSQL given with --db' if args.db else 'its own PostgreSQL cluster'}, "
        f"{args.sims} simulated gateways.\n\n{short}```\n{text}\n```\n"
    )


if __name__ == "__main__":
    main()
