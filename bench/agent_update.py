"""Agent self-update end to end: a real controller, N real agents, waves under inference load,
a broken release rolled back by the canary's own launcher, a downgrade refused.

The controller is ``jetfleet serve`` (SQLite, embedded broker with per-device credentials);
each gateway enrols with a one-time token and runs ``packaging/scripts/agent-launch run``
under a stand-in for systemd's ``Restart=on-failure``, from a release tree of the current
version, serving ``controller.demo.sample_models.classifier`` deployed by the controller. Then:

1. a bumped release (current + 1 patch) and a broken one (+2, its agent exits at start) are
   pushed with ``jetfleet agent releases push``;
2. ``jetfleet agent rollout start`` of the bumped release, canary first then the rest, while a
   client thread per device posts KServe v2 inference requests (counting failures) throughout;
3. the rollout succeeds and every device reports the new ``agent_version``, update confirmed;
4. a rollout of the broken release: the canary's launcher switches back by itself, the rollout
   fails and stops, no other device gets the order and all stay on the bumped release;
5. a rollout of the original version without ``--allow-downgrade`` is refused.

Prints a table per step and, last, ``agent-update: devices=N updated=N
broken_release_rolled_back=yes failed_requests=K downgrade_refused=yes`` (exit 1 when a ``no``
or fewer updated); writes ``bench/results/agent_update.md``.

Usage: ``python bench/agent_update.py [--devices 10] [--rate 5] [--max-in-flight 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from importlib.metadata import version as installed_version
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.agent_update_fleet import LABELS, MODEL, ROOT, Fleet, Load
from bench.provenance import revision
from controller.demo import sample_models

RESULT = ROOT / "bench" / "results" / "agent_update.md"
SELECTOR = ",".join(f"{k}={v}" for k, v in LABELS.items())


def bump(version: str, patches: int) -> str:
    major, minor, patch = (int(p) for p in version.split(".")[:3])
    return f"{major}.{minor}.{patch + patches}"


class Steps:
    """Each step's devices, seconds and the requests sent and failed during it."""

    def __init__(self) -> None:
        self.rows: list[list[str]] = []
        self.load: Load | None = None

    def run(self, name: str, devices: int, body: Any) -> Any:
        before = self.load.counts() if self.load else (0, 0)
        began = time.monotonic()
        result = body()
        seconds = time.monotonic() - began
        after = self.load.counts() if self.load else (0, 0)
        sent, failed = after[0] - before[0], after[1] - before[1]
        self.rows.append([name, str(devices), f"{seconds:.1f}", str(sent), str(failed)])
        print(f"  {name}: {seconds:.1f} s, {sent} requests, {failed} failed", flush=True)
        return result


def markdown(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def rollout(fleet: Fleet, version: str, args: argparse.Namespace, *extra: str) -> Any:
    """``jetfleet agent rollout start`` (canary, then the rest) and its finished state."""
    canary = fleet.gateways[0].device_id
    started = fleet.cli(
        "agent", "rollout", "start", version, "--selector", SELECTOR,
        "--canary", canary, "--waves", "1,100%", "--max-in-flight", str(args.max_in_flight),
        "--device-timeout", str(args.device_timeout), *extra, "--json",
    )  # fmt: skip
    rid = json.loads(started.stdout)["id"]
    with fleet.api() as api:

        def finished() -> Any:
            out = api.get(f"/api/v1/rollouts/{rid}").json()
            return None if out["state"] in ("pending", "running", "paused") else out

        return fleet.wait(
            f"rollout {rid} of {version} to finish", finished, 3 * args.device_timeout
        )


def waves_table(out: dict[str, Any]) -> list[list[str]]:
    rows = []
    targets = out["targets"] or []
    for wave in sorted({t["wave"] for t in targets}):
        ts = [t for t in targets if t["wave"] == wave and t["started_at"]]
        if not ts:
            continue
        first = min(datetime.fromisoformat(t["started_at"]) for t in ts)
        last = max(datetime.fromisoformat(t["finished_at"] or t["started_at"]) for t in ts)
        statuses = sorted({t["status"] for t in ts})
        rows.append(
            [str(wave), str(len(ts)), f"{(last - first).total_seconds():.1f}", ",".join(statuses)]
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=10)
    parser.add_argument("--rate", type=float, default=5.0, help="requests/s per device")
    parser.add_argument("--max-in-flight", type=int, default=3, help="devices updating at once")
    parser.add_argument("--device-timeout", type=float, default=180.0, help="seconds")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    parser.add_argument("--workdir", type=Path, help="work here (kept) instead of a temp dir")
    parser.add_argument("--no-write", action="store_true", help="do not write the result file")
    args = parser.parse_args()
    n = args.devices
    current = installed_version("jetfleet")
    bumped, broken = bump(current, 1), bump(current, 2)
    command = "python bench/agent_update.py " + shlex.join(sys.argv[1:])
    began_at = datetime.now(timezone.utc)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="agent-update-"))
    workdir.mkdir(parents=True, exist_ok=True)
    fleet = Fleet(workdir, current)
    steps = Steps()
    ids = [f"gw-{i:02d}" for i in range(1, n + 1)]
    updated = 0
    rolled_back = refused = False
    notes: list[str] = []
    wave_rows: list[list[str]] = []
    devices_ls = ""
    load: Load | None = None
    starts: dict[str, int] = {}
    print(f"agent-update: {n} devices, releases {current} → {bumped}, broken {broken}")
    try:

        def fleet_up() -> None:
            fleet.start_controller()
            fleet.enrol(ids)
            fleet.start_gateways()
            with fleet.api() as api:
                pushed = api.put(
                    f"/api/v1/models/{MODEL}/versions/1.0.0",
                    content=sample_models.classifier(),
                    headers={"Content-Type": "application/octet-stream"},
                )
                pushed.raise_for_status()
            fleet.cli("deploy", f"{MODEL}:1.0.0", "--selector", SELECTOR)

            def serving() -> bool:
                devices = fleet.devices()
                return all(
                    d in devices
                    and devices[d]["agent_version"] == current
                    and any(
                        s["name"] == MODEL and s["phase"] == "serving"
                        for s in devices[d]["reported"]
                    )
                    for d in ids
                )

            fleet.wait(f"{n} agents {current} serving {MODEL}", serving, 120 + 15 * n)

        steps.run(f"fleet up: enrol, start, deploy {MODEL}", n, fleet_up)
        load = steps.load = Load(fleet.gateways, args.rate)

        def push() -> None:
            for version, is_broken in ((bumped, False), (broken, True)):
                fleet.cli("agent", "releases", "push", str(fleet.release(version, is_broken)))

        steps.run(f"push releases {bumped} and {broken} (broken)", n, push)

        def update() -> int:
            out = rollout(fleet, bumped, args)
            wave_rows.extend(waves_table(out))
            if out["state"] != "succeeded":
                notes.append(f"rollout of {bumped} ended {out['state']}: {out['reason']}")

            def confirmed() -> list[str]:
                return [
                    d
                    for d, dev in fleet.devices().items()
                    if dev["agent_version"] == bumped
                    and (dev.get("agent_update") or {}).get("phase") == "confirmed"
                    and (dev.get("agent_update") or {}).get("version") == bumped
                ]

            with_report = fleet.wait(
                f"{n} devices reporting {bumped} confirmed",
                lambda: (done := confirmed()) and len(done) == n and done,
                60,
            )
            return len(with_report)

        updated = steps.run(f"rollout {bumped}: canary, then the rest", n, update)

        def broken_rollout() -> bool:
            out = rollout(fleet, broken, args)
            targets = {t["device_id"]: t for t in out["targets"] or []}
            canary = ids[0]

            def back() -> Any:
                dev = fleet.devices()[canary]
                update = dev.get("agent_update") or {}
                serving = any(
                    s["name"] == MODEL and s["phase"] == "serving" for s in dev["reported"]
                )
                ok = update.get("version") == broken and update.get("phase") == "rolled_back"
                return ok and dev["agent_version"] == bumped and serving and update

            update = fleet.wait(f"{canary} back on {bumped}, serving", back, 120)
            others = fleet.devices()
            record = fleet.gateways[0].state / "releases" / "rolled-back"
            checks = {
                "the canary's launcher switched back": record.exists()
                and f"version={broken}" in record.read_text(),
                "rollout failed": out["state"] == "failed",
                "canary target failed": targets[canary]["status"] == "failed",
                "others skipped, never ordered": all(
                    targets[d]["status"] == "skipped" and targets[d]["generation"] is None
                    for d in ids[1:]
                ),
                f"others still on {bumped}": all(
                    others[d]["agent_version"] == bumped
                    and (others[d].get("agent_update") or {}).get("version") == bumped
                    for d in ids[1:]
                ),
            }
            notes.append(f"{canary} reported rolled_back: {update.get('error')}")
            notes.append(f"rollout of {broken}: {out['state']}: {out['reason']}")
            notes.extend(f"check failed: {k}" for k, ok in checks.items() if not ok)
            return all(checks.values())

        rolled_back = steps.run(f"rollout {broken} (broken): canary rolls back", n, broken_rollout)

        def downgrade() -> bool:
            fleet.cli("agent", "releases", "push", str(fleet.release(current)))
            started = fleet.cli(
                "agent", "rollout", "start", current, "--selector", SELECTOR, check=False
            )
            said = (started.stdout + started.stderr).strip()
            notes.append(f"downgrade to {current}: exit {started.returncode}: {said}")
            still = fleet.devices()
            return (
                started.returncode != 0
                and "older than" in said
                and all(still[d]["agent_version"] == bumped for d in ids)
            )

        refused = steps.run(f"rollout {current} without --allow-downgrade", n, downgrade)
        devices_ls = fleet.cli("devices", "ls").stdout
    except (RuntimeError, OSError, KeyError, ValueError, httpx.HTTPError) as exc:
        notes.append(f"stopped: {type(exc).__name__}: {str(exc)[:4000]}")
        print(notes[-1], file=sys.stderr)
    finally:
        if load is not None:
            load.stop()
        starts = {g.device_id: g.supervisor.starts for g in fleet.gateways if g.supervisor}
        fleet.stop()
    if starts:
        counts = ", ".join(f"{d} {c}" for d, c in starts.items() if c != 1) or "none"
        notes.append(
            "launcher runs by the stand-in for systemd's Restart=on-failure, devices with more "
            f"than one (an update restarts by execv, not through it): {counts}"
        )
    sent, failed = load.counts() if load else (0, 0)
    if load is not None and load.why:
        notes.append("failed requests: " + ", ".join(f"{k} x{v}" for k, v in load.why.items()))
    line = (
        f"agent-update: devices={n} updated={updated} "
        f"broken_release_rolled_back={'yes' if rolled_back else 'no'} failed_requests={failed} "
        f"downgrade_refused={'yes' if refused else 'no'}"
    )
    table = markdown(["step", "devices", "seconds", "requests sent", "failed"], steps.rows)
    waves = markdown(["wave", "devices", "seconds", "status"], wave_rows)
    print()
    print(table)
    print()
    print(f"waves of the {bumped} rollout:")
    print(waves)
    for note in notes:
        print(f"- {note}")
    print(line, flush=True)
    if not args.no_write:
        notes.append("operator commands, in order: " + "; ".join(f"`{c}`" for c in fleet.cli_log))
        write_result(args, command, began_at, table, waves, notes, devices_ls, sent, line)
    if args.keep or args.workdir:
        print(f"work dir kept: {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if updated == n and rolled_back and refused else 1


def write_result(
    args: argparse.Namespace,
    command: str,
    began_at: datetime,
    table: str,
    waves: str,
    notes: list[str],
    devices_ls: str,
    sent: int,
    line: str,
) -> None:
    machine = (
        f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f} at the end), Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}"
    )
    text = [
        f"# Agent self-update, end to end ({began_at:%Y-%m-%d %H:%M} UTC)",
        "",
        f"Written by `{command}`; do not edit by hand.",
        "",
        f"- commit: {revision()}",
        f"- machine: {machine}",
        f"- load: one client thread per device, {args.rate:g} requests/s each on a keep-alive "
        f"connection ({sent} requests in all), from the release push to the end",
        f"- rollouts: `--waves 1,100% --canary gw-01 --max-in-flight {args.max_in_flight} "
        f"--device-timeout {args.device_timeout:g}`",
        "",
        table,
        "",
        "Waves of the first rollout (seconds: the wave's first order to its last device passed):",
        "",
        waves,
        "",
        *[f"- {note}" for note in notes],
        "",
    ]
    if devices_ls:
        text += ["`jetfleet devices ls` at the end:", "", "```", devices_ls.rstrip(), "```", ""]
    text += ["```", line, "```", ""]
    RESULT.write_text("\n".join(text))
    print(f"wrote {RESULT.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
