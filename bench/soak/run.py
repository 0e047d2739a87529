"""One soak run: start the fleet, play the fault schedule (:mod:`bench.soak.play`) while
operators roll out, roll back and redeploy, wait for convergence, then measure and report.

PostgreSQL: without ``db_url`` the run makes its own cluster in its work directory
(:class:`tests.pg_cluster.Cluster`), restarts it as a fault and removes it at the end, also when
the run fails; with ``db_url`` it uses that server and never restarts it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

from bench.soak import faults as F
from bench.soak.measure import (
    ProcStat,
    TelemetryCount,
    Window,
    count_telemetry,
    explain_failures,
    leaks,
    lost_near,
    pending_samples,
    snapshot,
    stored_samples,
    unspooled_samples,
)
from bench.soak.parts import (
    MODEL,
    AgentProc,
    Broker,
    ControllerProc,
    InferenceClients,
    PhaseWatch,
    Request,
    SimGateways,
)
from bench.soak.play import VERSIONS, FaultPlayer
from bench.soak.proxy import LinkProxy
from bench.soak.report import ProcRow, soak_line, spool_note, table, telemetry_text
from bench.soak.rss_trace import RssTrace
from controller.demo import sample_models
from controller.demo.fleet import wait_for
from tests.pg_cluster import Cluster

CATCH_UP_S = 60.0
"""After the agents stop, how long the bench waits for ingest to store what they sent."""


@dataclass
class Config:
    minutes: float
    agents: int = 3
    seed: int = 1
    db_url: str = ""
    """A PostgreSQL server to use instead of the run's own cluster (never restarted)."""
    faults: int = 0
    """0: one fault per 90 s of the run, at least 5."""
    outage_scale: float = 1.0
    sims: int = 20
    kinds: tuple[str, ...] = F.FAULT_KINDS
    telemetry_interval_s: float = 1.0
    work: Path | None = None
    log: Callable[[str], None] = print


@dataclass
class Outcome:
    schedule: str
    steps: list[str]
    faults: int
    telemetry: TelemetryCount
    requests: int
    failed: list[Request]
    unexplained: list[Request]
    converged_s: float | None
    rows: list[ProcRow]
    leaks: list[str]
    notes: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    line: str = ""

    def text(self) -> str:
        failed = [
            f"  t={r.t - self._t0:.1f}s agent={r.agent} {r.error}" for r in self.unexplained[:20]
        ]
        parts = [
            self.schedule,
            "executed:",
            *("  " + s for s in self.steps),
            *(["notes:"] + ["  " + n for n in self.notes] if self.notes else []),
            "",
            telemetry_text(self.telemetry),
            *("  lost " + x for x in self.lost[:30]),
            f"inference requests: {self.requests}, failed {len(self.failed)} "
            f"({len(self.failed) - len(self.unexplained)} during agent kills, "
            f"{len(self.unexplained)} unexplained)",
            *failed,
            f"converged: {self.converged_s if self.converged_s is not None else 'never'} s "
            "after the last fault ended",
            "",
            table(self.rows),
            spool_note(),
            "",
            self.line,
        ]
        return "\n".join(parts)

    _t0: float = 0.0


def _serves_desired(d: dict[str, Any] | None) -> bool:
    """The device (an API record) observed its desired generation and serves what it wants."""
    if d is None or d["observed_generation"] != d["desired_generation"]:
        return False
    want = {s["name"]: s["version"] for s in d["desired"]}
    got = {s["name"]: s["active_version"] for s in d["reported"] if s["phase"] == "serving"}
    return bool(want) and all(got.get(n) == v for n, v in want.items())


class Soak(FaultPlayer):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        if cfg.work is None:
            self.work = Path(tempfile.mkdtemp(prefix="jetfleet-soak-"))
            self.work.chmod(0o711)  # the cluster's user (postgres, under root) may enter it
        else:
            self.work = cfg.work
        self.prefix = f"soak-{uuid.uuid4().hex[:8]}/v1"
        self.log = cfg.log
        self.steps: list[str] = []
        self.notes: list[str] = []
        self.windows: list[Window] = []
        self.mounted: list[Path] = []
        self.proxies: list[LinkProxy] = []
        self.agents: list[AgentProc] = []
        self.sims: SimGateways | None = None
        self.clients: InferenceClients | None = None
        self.watch: PhaseWatch | None = None
        self.broker = Broker(self.work)
        self.controller: ControllerProc | None = None
        self.pg: Cluster | None = None
        self.db_url = cfg.db_url
        self.rollout_id: str | None = None
        self.deploys = 0
        self.start_stats: dict[str, tuple[int, ProcStat]] = {}
        self.start_basis: dict[str, str] = {}
        self.rss = RssTrace(self._pids)
        self.stopping = threading.Event()
        self.t0 = 0.0
        self._note_lock = threading.Lock()

    # ---- helpers
    def api(self) -> httpx.Client:
        assert self.controller is not None
        return httpx.Client(
            base_url=self.controller.url + "/api/v1",
            headers={"Authorization": f"Bearer {self.controller.token}"},
            timeout=30,
        )

    def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """One API call; retried while the controller is restarting."""
        deadline = time.monotonic() + 120
        while True:
            try:
                with self.api() as api:
                    r = api.request(method, path, **kw)
                if r.status_code < 500:
                    return r
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{method} {path}: the controller did not answer for 120 s")
            time.sleep(0.5)

    def device_ids(self) -> list[str]:
        sims = self.sims.ids if self.sims else []
        return [a.device_id for a in self.agents] + sims

    def converged(self) -> bool:
        r = self.call("GET", "/devices")
        ours = {d["id"]: d for d in r.json()}
        return all(_serves_desired(ours.get(dev)) for dev in self.device_ids())

    def device_converged(self, device: str) -> bool:
        r = self.call("GET", f"/devices/{device}")
        return r.status_code == 200 and _serves_desired(r.json())

    def note(self, text: str) -> None:
        with self._note_lock:
            at = time.monotonic() - self.t0 if self.t0 else 0.0
            wall = datetime.now(timezone.utc).strftime("%H:%M:%S")
            line = f"t={at:7.1f}s ({wall})  {text}"
            self.steps.append(line)
            self.log("soak: " + line)

    def stat(
        self, name: str, pid: int | None, state_dir: Path | None = None, after_s: float = 0.0
    ) -> None:
        """Record the start figures of the current life of a process; after a restart,
        ``after_s`` later, once its peers have reconnected and its first work is done."""

        def take() -> None:
            if pid is not None:
                with contextlib.suppress(Exception):
                    self.start_stats[name] = (pid, snapshot(pid, state_dir))

        if after_s:
            timer = threading.Timer(after_s, take)
            timer.daemon = True
            timer.start()
        else:
            take()

    def _pids(self) -> dict[str, int | None]:
        controller = self.controller.pid if self.controller else None
        return {"controller": controller, **{a.device_id: a.pid for a in self.agents}}

    # ---- setup
    def setup(self) -> None:
        cfg = self.cfg
        if not self.db_url:
            self.pg = Cluster(self.work, database="soak")
            self.db_url = self.pg.start()
            self.notes.append(
                f"PostgreSQL: the run's own cluster ({self.pg.version()}) on "
                f"127.0.0.1:{self.pg.port}, files in {self.pg.root}, removed at the end"
            )
        self.broker.start()
        self.controller = ControllerProc(self.work, self.db_url, self.broker.url, self.prefix)
        self.controller.start()
        for i, version in enumerate(VERSIONS):
            data = sample_models.classifier(seed=i + 1)
            r = self.call("PUT", f"/models/{MODEL}/versions/{version}", content=data)
            if r.status_code not in (200, 201):
                raise RuntimeError(f"push {version}: {r.status_code} {r.text}")
        for i in range(cfg.agents):
            device = f"soak-gw-{i}-{uuid.uuid4().hex[:4]}"
            proxy = LinkProxy(("127.0.0.1", self.broker.port)).start()
            self.proxies.append(proxy)
            token = self.call(
                "POST", "/tokens", json={"name": device, "role": "device", "device_id": device}
            ).json()["token"]
            agent = AgentProc(
                i, device, self.work, proxy, self.controller.url, token, self.prefix,
                cfg.telemetry_interval_s,
            )  # fmt: skip
            self.agents.append(agent)
        self.mount_small_state_dirs()
        self.watch = PhaseWatch(self.broker.url, self.prefix)
        self.watch.start()
        for agent in self.agents:
            agent.start()
        self.rss.start()
        viewer = self.call("POST", "/tokens", json={"name": "soak-sims", "role": "viewer"})
        self.sims = SimGateways(self.broker.url, self.prefix, cfg.sims, viewer.json()["token"])
        self.sims.start()
        procs = [a.proc for a in self.agents if a.proc]
        wait_for(
            "every device to report",
            lambda: (
                set(self.device_ids()) <= {d["id"] for d in self.call("GET", "/devices").json()}
            ),
            120,
            procs,
        )
        for dev in self.device_ids():
            self.call("PUT", f"/devices/{dev}/labels", json={"labels": {"fleet": "soak"}})
        self.deploy(VERSIONS[0])
        wait_for("version 1.0.0 serving everywhere", self.converged, 180, procs, 0.5)
        wait_for("every agent ready", lambda: all(a.ready() for a in self.agents), 60, procs)
        self.clients = InferenceClients(self.agents)
        self.clients.start()
        time.sleep(3)  # clients connected and steady before the start figures; not a state wait
        self.stat("mosquitto", self.broker.pid)
        self.stat("controller", self.controller.pid)
        for a in self.agents:
            self.stat(a.device_id, a.pid, a.state_dir)

    def mount_small_state_dirs(self) -> None:
        """A 64 MiB tmpfs as the state directory of each agent the schedule fills (root only)."""
        for agent in self.agents:
            agent.state_dir.mkdir(parents=True, exist_ok=True)
            if os.geteuid() != 0:
                continue
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(agent.state_dir)],
                capture_output=True,
                text=True,
            )
            if done.returncode == 0:
                self.mounted.append(agent.state_dir)
            else:
                self.notes.append(f"tmpfs for {agent.device_id} not mounted: {done.stderr.strip()}")

    # ---- actions
    def deploy(self, version: str, device: str | None = None) -> None:
        body: dict[str, Any] = {"model": MODEL, "version": version}
        body.update({"device": device} if device else {"selector": "fleet=soak"})
        r = self.call("POST", "/deployments", json=body)
        if r.status_code != 200:
            raise RuntimeError(f"deploy {version}: {r.status_code} {r.text}")
        self.deploys += 1

    def act(self, step: F.Step) -> None:
        if step.kind == "redeploy":
            version = VERSIONS[self.deploys % len(VERSIONS)]
            self.deploy(version)
            self.note(f"redeploy {version} to fleet=soak")
        elif step.kind == "rollout":
            body = {
                "model": MODEL,
                "version": VERSIONS[1],
                "targets": {"selector": "fleet=soak"},
                "strategy": {"waves": "1,50%,100%", "device_timeout_s": 120},
            }
            r = self.call("POST", "/rollouts", json=body)
            self.rollout_id = r.json().get("id") if r.status_code == 201 else None
            self.note(f"rollout {VERSIONS[1]}: {r.status_code} id={self.rollout_id}")
        elif step.kind == "rollback":
            if self.rollout_id is None:
                self.note("rollback: no rollout to roll back")
                return
            r = self.call("POST", f"/rollouts/{self.rollout_id}/rollback")
            state = r.json().get("state") if r.status_code == 200 else r.text[:120]
            self.note(f"rollback {self.rollout_id}: {r.status_code} {state}")

    def finish(self, last_fault_end: float) -> tuple[float | None, list[ProcRow]]:
        procs = [a.proc for a in self.agents if a.proc]
        converged_s: float | None = None
        try:
            wait_for("convergence", self.converged, 300, procs, 0.5)
            converged_s = time.monotonic() - last_fault_end
            self.note(f"converged {converged_s:.1f}s after the last fault")
        except Exception as exc:  # noqa: BLE001 - reported, the run goes on to measure
            self.note(f"not converged: {exc}")
        time.sleep(5)  # let the last swaps' memory settle before the end figures
        self.stopping.set()
        self.rss.stop()
        rows: list[ProcRow] = []
        assert self.controller is not None
        named: list[tuple[str, int | None, Path | None, int]] = [
            ("mosquitto", self.broker.pid, None, self.broker.starts),
            ("controller", self.controller.pid, None, self.controller.starts),
        ]
        named += [(a.device_id, a.pid, a.state_dir, a.starts) for a in self.agents]
        for name, pid, state_dir, starts in named:
            start = self.start_stats.get(name)
            end = snapshot(pid, state_dir) if pid else None
            row = ProcRow(name, start[1] if start else None, end)
            if starts > 1:
                basis = self.start_basis.get(name, "its last start")
                if name in self.start_basis:
                    basis = f"its last life, {basis}"
                row.note = f"started {starts} times; start = {basis}"
            if start and end and start[0] == end.pid:
                row.leaks = leaks(start[1], end)
            trend = self.rss.trend(name, pid) if pid and name != "mosquitto" else None
            if trend:
                self.notes.append(trend)
            rows.append(row)
        return converged_s, rows

    def caught_up(
        self, devices: list[str], pending: list[str], unspooled: dict[str, str]
    ) -> list[tuple[str, datetime]]:
        """The stored samples once ingest has stored what the agents handed to the broker (no
        gap left), or after :data:`CATCH_UP_S`; how long that took is noted."""
        stopped = time.monotonic()
        while True:
            stored = stored_samples(self.db_url, devices)
            gaps = count_telemetry([sid for sid, _ in stored], pending, unspooled).lost
            waited = time.monotonic() - stopped
            if not gaps or waited > CATCH_UP_S:
                self.notes.append(
                    f"ingest caught up {waited:.1f}s after the agents stopped"
                    if not gaps
                    else f"{gaps} samples still missing {waited:.0f}s after the agents stopped"
                )
                return stored
            time.sleep(1.0)

    def close(self) -> None:
        for part in (self.clients, self.sims):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.stop()
        for agent in self.agents:
            agent.stop()
        if self.watch:
            self.watch.stop()
        if self.controller:
            self.controller.stop()
        self.broker.stop()
        for proxy in self.proxies:
            proxy.stop()
        for path in self.mounted:
            subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)
        if self.pg is not None:
            self.pg.remove(keep_log=self.work / "logs" / "postgresql.log")

    def run(self) -> Outcome:
        cfg = self.cfg
        seconds = cfg.minutes * 60
        nfaults = cfg.faults or max(5, int(seconds // 90))
        kinds, not_done = cfg.kinds, dict(F.NOT_DONE)
        if cfg.db_url:
            kinds = tuple(k for k in kinds if k != F.POSTGRESQL_RESTART)
            not_done[F.POSTGRESQL_RESTART] = F.NOT_DONE_GIVEN_DB
        steps = F.plan(seconds, nfaults, cfg.agents, cfg.seed, kinds, cfg.outage_scale)
        schedule = F.describe(steps, cfg.seed, not_done)
        self.log(schedule)
        try:
            self.setup()
            last = self.play(steps)
            converged_s, rows = self.finish(last)
            assert self.clients is not None
            self.clients.stop()
            requests = list(self.clients.records)
            for agent in self.agents:
                agent.stop()
            devices = [a.device_id for a in self.agents]
            # what the stopped agents still hold is pending, not lost
            pending = [s for a in self.agents for s in pending_samples(a.state_dir)]
            unspooled = unspooled_samples(p for a in self.agents for p in a.logs())
            stored = self.caught_up(devices, pending, unspooled)
        finally:
            self.close()
        telemetry = count_telemetry([sid for sid, _ in stored], pending, unspooled)
        self.lost = lost_near(telemetry.lost_ids, stored)
        explained, unexplained = explain_failures(requests, self.windows)
        all_leaks = [f"{r.name}:{x}" for r in rows for x in r.leaks]
        out = Outcome(
            schedule=schedule,
            steps=self.steps,
            faults=sum(1 for s in steps if s.is_fault),
            telemetry=telemetry,
            requests=len(requests),
            failed=explained + unexplained,
            unexplained=unexplained,
            converged_s=converged_s,
            rows=rows,
            leaks=all_leaks,
            notes=self.notes,
            lost=self.lost,
        )
        out._t0 = self.t0
        out.line = soak_line(
            cfg.minutes, out.faults, telemetry, len(out.failed), converged_s, all_leaks
        )
        return out
