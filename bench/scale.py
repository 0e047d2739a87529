"""Scale-out bench: R controller replicas on PostgreSQL and their own Mosquitto,
N lightweight simulated gateways with per-device credentials, rollouts in waves, the rollout
leader killed with -9 in the middle of one.

Prints per rollout and wave the devices and seconds, the failover (kill → another replica holds
the lease and the next wave's first document reaches a gateway), the final state of every
gateway, telemetry produced against stored, CPU seconds per device per minute for each part,
and last ``scale: devices=N replicas=R converged_s=X failover_s=Y telemetry_lost=L
duplicated=D``. With ``--out DIR`` the run is appended to ``DIR/scale.md``.

Usage: ``python bench/scale.py --devices 1000 --replicas 3 [--out bench/results]
[--pg postgresql+psycopg://postgres@127.0.0.1:5432/postgres]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.provenance import Provenance
from bench.scale.run import Config, Scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, required=True)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--out", type=Path, help="append the run to OUT/scale.md")
    parser.add_argument(
        "--pg",
        default=os.environ.get(
            "JETFLEET_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
        ),
        help="PostgreSQL server URL; the bench creates its own database there and drops it",
    )
    parser.add_argument("--procs", type=int, default=0, help="gateway processes (0: auto)")
    parser.add_argument("--lease-ttl", type=float, default=10.0, help="rollout lease TTL, s")
    parser.add_argument("--telemetry-interval", type=float, default=30.0)
    parser.add_argument("--steady", type=float, default=0.0, help="steady window, s (0: auto)")
    parser.add_argument("--connect-rate", type=float, default=200.0, help="connections/s")
    parser.add_argument("--ingest-workers", type=int, default=0, help="per replica")
    parser.add_argument("--keep", action="store_true", help="keep the database and work dir")
    args = parser.parse_args()
    provenance = Provenance()
    if args.replicas < 2:
        parser.error("--replicas must be at least 2 (one is killed)")
    cfg = Config(
        devices=args.devices,
        replicas=args.replicas,
        server_url=args.pg,
        procs=args.procs,
        lease_ttl_s=args.lease_ttl,
        telemetry_interval_s=args.telemetry_interval,
        steady_s=args.steady,
        connect_per_s=args.connect_rate,
        ingest_workers=args.ingest_workers,
        keep_db=args.keep,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    outcome = Scale(cfg).run()
    text = outcome.text()
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        results = args.out / "scale.md"
        if not results.exists():
            results.write_text(
                "# Scale-out: simulated gateways, controller replicas, a leader killed "
                "mid-rollout\n\nWritten by `bench/scale.py`, one section per run, newest last; "
                "see its docstring for what each table measures. The goal (converged within 30 "
                "s at 10,000 devices) is absolute, so read each run beside its machine's load.\n",
                encoding="utf-8",
            )
        with results.open("a", encoding="utf-8") as fh:
            fh.write(
                f"\n## {args.devices} devices, {args.replicas} replicas "
                f"({provenance.started:%Y-%m-%d %H:%M} UTC)\n\n{provenance.block()}\n"
                f"```\n{text}\n```\n"
            )


if __name__ == "__main__":
    main()
