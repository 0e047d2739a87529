"""Rollout convergence: N simulated agents (lightweight paho clients in a few processes) on one
Mosquitto; a rollout of a new model version in waves ``1,10%,50%,100%``.

Reported per wave: devices, seconds from the wave's first update until its last device serves
the new version, and the total from rollout creation to all serving, with and without artifact
download (the simulated agent fetches the artifact over HTTP and checks its sha256). The run
without download is the baseline the run with download is compared with, in the same bench run.
Usage: ``python bench/rollout_convergence.py [--devices 1000] [--procs 4] [--broker mqtt://...]
[--no-download-only] [--out bench/results]``; each run replaces ``rollout_convergence.md``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.provenance import Provenance
from bench.results_file import ratio, write
from controller.db.rollout_store import RolloutStore
from controller.db.session import make_engine
from controller.demo import sample_models
from controller.server import Controller
from controller.settings import Settings
from shared.topics import Topics

WAVES = "1,10%,50%,100%"


def agents(broker: str, prefix: str, ids: list[str], download: bool, token: str, stop: Any) -> None:
    from tests.integration.rollouts.sim_agents import SimAgent

    # Connect in small batches: Mosquitto queues at most 1,000 QoS 1 messages per subscriber
    # (max_queued_messages) and drops the rest, so a thousand agents reporting in the same
    # second would lose enrolments while the controller stores them one by one.
    running = []
    for start in range(0, len(ids), 25):
        for d in ids[start : start + 25]:
            agent = SimAgent(
                broker, Topics(prefix), d, {"fleet": "bench"}, download=download, token=token
            )
            running.append(agent.start())
        time.sleep(0.25)
    stop.wait()
    for agent in running:
        agent.stop()


def wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def run(n: int, procs: int, broker: str, download: bool) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="jetfleet-rollout-bench-"))
    prefix = f"bench/{uuid.uuid4().hex[:8]}"
    settings = Settings(
        db_url=f"sqlite:///{work}/db.sqlite",
        broker_url=broker,
        data_dir=work / "data",
        http_port=0,
        topic_prefix=prefix,
        auto_migrate=True,
    )
    controller = Controller(settings)
    controller.start()
    controller.serve_in_thread()
    access = controller.services.access if controller.services else None
    assert access is not None
    admin = access.create("bench", "admin").token
    downloads = access.create("bench-agents", "viewer").token
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    ids = [f"b{i:04d}" for i in range(n)]
    workers = [
        ctx.Process(target=agents, args=(broker, prefix, ids[i::procs], download, downloads, stop))
        for i in range(procs)
    ]
    for w in workers:
        w.start()
    api = httpx.Client(
        base_url=controller.http_url, timeout=120, headers={"Authorization": f"Bearer {admin}"}
    )
    try:
        wait(lambda: len(api.get("/api/v1/devices").json()) == n, 60 + n / 2, "enrolment")
        for device_id in ids:  # as the operator does: the labels agents report are ignored
            api.put(
                f"/api/v1/devices/{device_id}/labels", json={"labels": {"fleet": "bench"}}
            ).raise_for_status()
        for version, seed in (("1.0.0", 1), ("2.0.0", 2)):
            api.put(
                f"/api/v1/models/det/versions/{version}",
                content=sample_models.classifier(seed=seed),
            ).raise_for_status()
        api.post(
            "/api/v1/deployments",
            json={"model": "det", "version": "1.0.0", "selector": "fleet=bench"},
        ).raise_for_status()

        def all_on(version: str) -> bool:
            devices = api.get("/api/v1/devices").json()
            return all(
                any(
                    s["phase"] == "serving" and s["active_version"] == version
                    for s in d["reported"]
                )
                for d in devices
            )

        wait(lambda: all_on("1.0.0"), 300, "1.0.0 everywhere")
        t0 = time.monotonic()
        created = datetime.now(timezone.utc)
        body = {
            "model": "det",
            "version": "2.0.0",
            "targets": {"selector": "fleet=bench"},
            "strategy": {"waves": WAVES, "device_timeout_s": 300},
        }
        rid = api.post("/api/v1/rollouts", json=body).json()["id"]
        wait(
            lambda: api.get(f"/api/v1/rollouts/{rid}").json()["state"] == "succeeded",
            600,
            "the rollout",
        )
        total = time.monotonic() - t0
        engine = make_engine(settings.db_url)
        rollout = RolloutStore(engine).get(rid)
        engine.dispose()
        waves: list[dict[str, Any]] = []
        for wave in range(rollout.waves):
            ts = [t for t in rollout.targets if t.wave == wave]
            if not ts:  # a small fleet leaves a percentage wave empty
                continue
            start = min(t.started_at for t in ts if t.started_at)
            end = max(t.validated_at for t in ts if t.validated_at)
            waves.append(
                {
                    "wave": wave + 1,
                    "devices": len(ts),
                    "seconds": (end - start).total_seconds(),
                    "done_at": (end - created).total_seconds(),
                }
            )
        return {"download": download, "total_s": total, "waves": waves}
    finally:
        api.close()
        stop.set()
        for w in workers:
            w.join(60)
        controller.stop()


def render(n: int, results: list[dict[str, Any]]) -> str:
    lines = [
        "| download | wave | devices | wave s (first update → last serving) | since start s |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        for w in r["waves"]:
            lines.append(
                f"| {'yes' if r['download'] else 'no'} | {w['wave']} | {w['devices']} | "
                f"{w['seconds']:.2f} | {w['done_at']:.2f} |"
            )
        lines.append(
            f"| {'yes' if r['download'] else 'no'} | **all** | {n} | | **{r['total_s']:.2f}** "
            "(create → state succeeded) |"
        )
    return "\n".join(lines) + "\n"


def summary_line(n: int, results: list[dict[str, Any]]) -> str:
    """The ``rollout-convergence:`` line a reader quotes; with download as a ratio of the run
    without, same bench run."""
    plain = next(r for r in results if not r["download"])
    line = (
        f"rollout-convergence: devices={n} seconds={plain['total_s']:.2f} "
        f"slowest_wave_s={max(w['seconds'] for w in plain['waves']):.2f}"
    )
    fetched = next((r for r in results if r["download"]), None)
    if fetched is not None:
        line += (
            f" seconds_with_download={fetched['total_s']:.2f} "
            f"download_ratio={ratio(fetched['total_s'], plain['total_s']):.2f}x"
        )
    return line + " (goal: seconds <= 10 at 1,000 devices)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--broker", default="mqtt://127.0.0.1:1883")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--no-download-only", action="store_true")
    args = parser.parse_args()
    provenance = Provenance()
    modes = [False] if args.no_download_only else [False, True]
    results = [run(args.devices, args.procs, args.broker, d) for d in modes]
    text = render(args.devices, results)
    summary = summary_line(args.devices, results)
    print(f"{text}\n{summary}")
    write(
        args.out,
        "rollout_convergence.py",
        f"Rollout convergence: {args.devices} simulated agents",
        f"A rollout of a new model version in waves {WAVES} to {args.devices} simulated agents "
        f"(lightweight paho clients in {args.procs} process{'es' if args.procs > 1 else ''}) on "
        "one Mosquitto, the controller on SQLite; seconds per wave from its first update until "
        "its last device serves the new version, and in total from the rollout's creation "
        "until its state is succeeded. "
        + (
            "Only the run without artifact download (`--no-download-only`)."
            if args.no_download_only
            else "The baseline is the run without artifact download; in the second run of the "
            "same bench each agent fetches the artifact from the controller over HTTP and checks "
            "its sha256 (download_ratio: with / without)."
        ),
        provenance,
        text,
        summary,
    )


if __name__ == "__main__":
    main()
