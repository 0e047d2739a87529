"""One scale run: the fleet up, a steady window of telemetry, a clean rollout, a rollout whose
leader is killed with -9 in the middle (and started again), then the counts.

Phases, each logged: a fresh database (``jetfleet db upgrade``), N device credentials written
in bulk, the broker, R replicas, three model versions pushed, the gateways connected, 1.0.0
deployed everywhere, ``steady_s`` of telemetry only, rollout 2.0.0 (converged_s), rollout 3.0.0
with the leader killed once wave ``kill_wave`` has started (failover_s) and started again
``restart_after_s`` later, ``settle_s`` for queued telemetry, telemetry stopped, every sample
acknowledged and stored, then the gateways' and the database's view compared.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from bench.scale.broker import CONTROLLER_USER, ScaleBroker, device_secrets
from bench.scale.fleet_db import (
    Reader,
    create_database,
    database_name,
    drop_database,
    enrol_in_bulk,
    upgrade,
)
from bench.scale.gateway_procs import GatewayProcess
from bench.scale.gateways import Counts, DeviceView, FleetSpec
from bench.scale.measure import (
    CpuMeter,
    RolloutTimes,
    TelemetryCount,
    count_telemetry,
    postgres_backends,
    wave_times,
)
from bench.scale.outcome import LABELS, MODEL, VERSIONS, Config, Outcome
from bench.scale.replicas import Replica, leader_of, replica_set
from bench.scale.report import Failover, FinalState, cpu_table, telemetry_text
from controller.demo import sample_models

TERMINAL = {"succeeded", "failed", "aborted", "rolled_back"}
GATEWAYS_PER_PROCESS = 2500
LEASE_POLL_S = 0.05
QUIET_CORES = 0.1
"""Replica CPU (cores, per replica and 10,000 devices) below which the replicas count as idle:
steady telemetry ingest measured 0.05 here."""
QUIET_WINDOW_S = 5.0
QUIET_ABOVE_STEADY = 1.33
"""After the steady window: idle means at most this times its replica CPU rate."""


class Scale:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.log = cfg.log
        self.work = cfg.work or Path(tempfile.mkdtemp(prefix="jetfleet-scale-"))
        self._own_work = cfg.work is None
        self.prefix = f"scale/{uuid.uuid4().hex[:8]}"
        self.procs = cfg.procs or max(2, math.ceil(cfg.devices / GATEWAYS_PER_PROCESS))
        self.db_url = ""
        self.broker: ScaleBroker | None = None
        self.replicas: list[Replica] = []
        self.gateways: list[GatewayProcess] = []
        self.meter: CpuMeter | None = None
        self.reader: Reader | None = None
        self.api: httpx.Client | None = None
        self.notes: list[str] = []
        self._t0 = time.monotonic()

    def say(self, text: str) -> None:
        self.log(f"[{time.monotonic() - self._t0:7.1f}s] {text}")

    # --- the run -------------------------------------------------------------------------

    def run(self) -> Outcome:
        finished = False
        try:
            outcome = self._run()
            finished = True
            return outcome
        finally:
            self._teardown(keep_work=not finished)

    def _run(self) -> Outcome:
        cfg = self.cfg
        n = cfg.devices
        self.db_url = create_database(cfg.server_url)
        self.say(f"database {database_name(self.db_url)}: upgrading the schema")
        upgrade(self.db_url)
        ids = [f"gw-{i:05d}" for i in range(n)]
        secrets = device_secrets(ids)
        enrol_in_bulk(self.db_url, secrets, LABELS)
        self.say(f"{n} devices and their credentials written in bulk")
        broker = self.broker = ScaleBroker(self.work, self.prefix, secrets)
        broker.start()
        self.reader = Reader(self.db_url)
        self.replicas = replica_set(
            cfg.replicas,
            db_url=self.db_url,
            broker_url=broker.url,
            broker_user=CONTROLLER_USER,
            password_file=broker.password_file,
            data_dir=self.work / "shared-data",
            prefix=self.prefix,
            lease_ttl_s=cfg.lease_ttl_s,
            logs=self.work / "logs",
            ingest_workers=cfg.ingest_workers,
        )
        for replica in self.replicas:
            replica.start()
        for replica in self.replicas:
            replica.wait_ready()
        token = (self.work / "shared-data" / "admin-token").read_text().strip()
        self.say(f"broker on {broker.url}, {cfg.replicas} replicas ready")
        self.meter = CpuMeter(
            {
                "replicas": lambda: [p for r in self.replicas if (p := r.pid)],
                "broker": lambda: [p for p in [broker.pid] if p],
                "gateways": lambda: [p for g in self.gateways if (p := g.pid)],
                "postgresql": postgres_backends(database_name(self.db_url)),
            }
        ).start()
        self.meter.mark("start")
        api = self.api = httpx.Client(
            base_url=self.replicas[0].url,
            timeout=600,
            headers={"Authorization": f"Bearer {token}"},
        )
        for seed, version in enumerate(VERSIONS, start=1):
            r = api.put(
                f"/api/v1/models/{MODEL}/versions/{version}",
                content=sample_models.classifier(seed=seed),
            )
            r.raise_for_status()

        self._start_gateways(secrets)
        self._wait(self._all_observed, 120 + n / 20, "the replicas to store every first report")
        self.say("every gateway's first report stored")
        t = time.monotonic()
        r = api.post(
            "/api/v1/deployments",
            json={"model": MODEL, "version": VERSIONS[0], "selector": "fleet=scale"},
        )
        r.raise_for_status()
        self._wait(lambda: self.counts().serving.get(VERSIONS[0], 0) == n, 120 + n / 20,
                   f"{n} gateways serving {VERSIONS[0]}")  # fmt: skip
        self._wait(self._all_observed, 120 + n / 50, "the database to see every report")
        self.say(f"{VERSIONS[0]} deployed everywhere in {time.monotonic() - t:.1f} s")

        self._quiet("the deploy's reports")
        steady_s = cfg.steady_s or (30.0 if n <= 1000 else 60.0)
        self.meter.mark("steady-start")
        time.sleep(steady_s)
        self.meter.mark("steady-end")
        self.say(f"steady window of {steady_s:.0f} s done")

        rollouts: list[tuple[str, RolloutTimes]] = []
        first = self._create_rollout(VERSIONS[1])
        self._wait(lambda: self._state(first) in TERMINAL, 300 + n / 10, "rollout 2.0.0")
        self.say(f"rollout {VERSIONS[1]}: {self._state(first)}")
        self._quiet(f"rollout {VERSIONS[1]}'s reports")
        before = self.reader.generations()
        second = self._create_rollout(VERSIONS[2])
        failover, kill_at = self._kill_leader_during(second)
        self.meter.mark("rollouts-end")
        self.say(f"rollout {VERSIONS[2]}: {self._state(second)}")

        telemetry, views = self._settle()
        self.meter.mark("end")
        by_id = {v.device_id: v for v in views}
        for label, rid, version in (
            (f"{VERSIONS[1]} (clean)", first, VERSIONS[1]),
            (f"{VERSIONS[2]} (leader killed)", second, VERSIONS[2]),
        ):
            row = self.reader.rollout(rid)
            times = wave_times(
                version, rid, row.state, row.created_at, row.finished_at,
                self.reader.targets(rid), by_id,
            )  # fmt: skip
            rollouts.append((label, times))
        if failover is not None and kill_at is not None:
            failover = self._next_wave_after_kill(failover, kill_at, second, by_id)
        final = self._final(views, before)
        return Outcome(
            cfg, self.procs, rollouts, failover, final, telemetry, self._cpu(), self.notes
        )

    # --- steps ---------------------------------------------------------------------------

    def _start_gateways(self, secrets: list[Any]) -> None:
        cfg = self.cfg
        assert self.broker is not None
        creds = [s.cred for s in secrets]
        for i in range(self.procs):
            spec = FleetSpec(
                host="127.0.0.1",
                port=self.broker.port,
                prefix=self.prefix,
                model=MODEL,
                telemetry_interval_s=cfg.telemetry_interval_s,
                connect_per_s=cfg.connect_per_s / self.procs,
                seed=i + 1,
            )
            self.gateways.append(GatewayProcess(i, spec, creds[i :: self.procs]).start())
        n = cfg.devices
        self._wait(lambda: self.counts().connected == n, 120 + 2 * n / cfg.connect_per_s,
                   f"{n} gateways connected")  # fmt: skip
        self.say(f"{n} gateways connected ({self.procs} processes)")

    def counts(self) -> Counts:
        total = Counts()
        for g in self.gateways:
            total = total.add(g.ask("counts"))
        return total

    def views(self) -> list[DeviceView]:
        out: list[DeviceView] = []
        for g in self.gateways:
            out += g.ask("views", 120)
        return out

    def _all_observed(self) -> bool:
        """Every device online, its stored observed generation the desired one."""
        assert self.reader is not None
        gens = self.reader.generations()
        return self.reader.online() == len(gens) and all(d == o for d, o in gens.values())

    def _create_rollout(self, version: str) -> str:
        assert self.api is not None
        body = {
            "model": MODEL,
            "version": version,
            "targets": {"selector": "fleet=scale"},
            "strategy": {"waves": self.cfg.waves, "device_timeout_s": 600},
        }
        r = self.api.post("/api/v1/rollouts", json=body)
        r.raise_for_status()
        rid = str(r.json()["id"])
        self.say(f"rollout {version} created: {rid}")
        return rid

    def _state(self, rollout_id: str) -> str:
        assert self.reader is not None
        return self.reader.rollout(rollout_id).state

    def _kill_leader_during(self, rid: str) -> tuple[Failover | None, float | None]:
        """Kill the lease holder once wave ``kill_wave`` has started; start it again later."""
        cfg = self.cfg
        reader = self.reader
        assert reader is not None
        deadline = time.monotonic() + 300 + cfg.devices / 10
        while True:
            row = reader.rollout(rid)
            if row.state in TERMINAL:
                self.notes.append(f"rollout {rid} ended before wave {cfg.kill_wave} started")
                return None, None
            if row.current_wave >= cfg.kill_wave - 1:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"wave {cfg.kill_wave} of {rid} never started")
            time.sleep(0.02)
        lease = reader.lease()
        assert lease is not None, "a rollout runs without a lease"
        leader = leader_of(self.replicas, lease[0])
        if leader is None:  # the lease row is committed before the holder logs it
            time.sleep(0.5)
            leader = leader_of(self.replicas, lease[0])
        assert leader is not None, f"no replica logged holding {lease[0]}"
        created = row.created_at.timestamp()
        kill_at = time.time()
        leader.kill9()
        wave = reader.rollout(rid).current_wave + 1
        self.say(f"killed leader {leader.replica_id} ({lease[0]}) in wave {wave}")
        takeover_s: float | None = None
        successor: str | None = None
        restarted = False
        deadline = time.monotonic() + 300 + cfg.devices / 10
        while True:
            now = time.time()
            if takeover_s is None:
                held = reader.lease()
                if held is not None and held[0] != lease[0] and held[1].timestamp() > now:
                    takeover_s = now - kill_at
                    found = leader_of(self.replicas, held[0])
                    successor = found.replica_id if found else held[0]
                    if found is leader:  # its new process won the lease
                        successor += " (started again)"
                    self.say(f"{successor} holds the lease, {takeover_s:.2f} s after the kill")
            if not restarted and now - kill_at >= cfg.restart_after_s:
                leader.start()
                restarted = True
                self.say(f"{leader.replica_id} started again")
            if restarted and takeover_s is not None and reader.rollout(rid).state in TERMINAL:
                break
            if time.monotonic() > deadline:
                self.notes.append(f"rollout {rid} did not finish after the kill")
                break
            time.sleep(LEASE_POLL_S)
        leader.wait_ready()
        failover = Failover(
            killed=leader.replica_id,
            kill_s=kill_at - created,
            wave=wave,
            successor=successor,
            takeover_s=takeover_s,
            first_publish_s=None,
            next_wave_s=None,
            restarted_after_s=cfg.restart_after_s,
        )
        return failover, kill_at

    def _next_wave_after_kill(
        self, f: Failover, kill_at: float, rid: str, views: dict[str, DeviceView]
    ) -> Failover:
        """When the successor's first document, and the next wave's, reached a gateway."""
        assert self.reader is not None
        version = VERSIONS[2]
        nxt = [t.device_id for t in self.reader.targets(rid) if t.wave == f.wave]  # 0-based
        got = [
            v.received[version]
            for d in nxt
            if (v := views.get(d)) is not None and version in v.received
        ]
        if not nxt:
            self.notes.append(f"the leader was killed in the last wave ({f.wave})")
        first: float | None = None
        if f.takeover_s is not None:  # published after the lease changed hands: the successor
            since = kill_at + f.takeover_s - LEASE_POLL_S
            after = [t for v in views.values() if (t := v.received.get(version, 0.0)) >= since]
            first = min(after) - kill_at if after else None
        return replace(f, first_publish_s=first, next_wave_s=(min(got) - kill_at) if got else None)

    def _settle(self) -> tuple[TelemetryCount, list[DeviceView]]:
        """Wait for queued telemetry, stop producing, wait until every sample is stored."""
        cfg = self.cfg
        reader = self.reader
        assert reader is not None
        time.sleep(cfg.settle_s)
        for g in self.gateways:
            g.ask("stop_telemetry")
        self._wait(lambda: self.counts().waiting == 0, 120, "every sample acknowledged")
        produced = self.counts().produced
        last, stable_since = -1, time.monotonic()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            count = reader.sample_count()
            if count != last:
                last, stable_since = count, time.monotonic()
            if count >= produced or time.monotonic() - stable_since > 10:
                break
            time.sleep(0.5)
        views = self.views()
        telemetry = count_telemetry(views, reader.sample_ids())
        self.say(telemetry_text(telemetry))
        return telemetry, views

    def _final(
        self, views: list[DeviceView], before: dict[str, tuple[int, int | None]]
    ) -> FinalState:
        assert self.reader is not None
        gens = self.reader.generations()
        on_final = intermediate = steps = stale = 0
        for v in views:
            desired, observed = gens[v.device_id]
            if v.generation == desired and observed == desired and v.version == VERSIONS[-1]:
                on_final += 1
            if v.generation != desired or observed != desired:
                intermediate += 1
            if desired - before[v.device_id][0] != 1:
                steps += 1
            stale += v.stale
        return FinalState(
            devices=len(views),
            on_final=on_final,
            intermediate=intermediate,
            steps_not_one=steps,
            stale_documents=stale,
            lost_connections=self.counts().lost,
        )

    def _cpu(self) -> str:
        meter = self.meter
        assert meter is not None
        steady, steady_s = meter.between("steady-start", "steady-end")
        rollouts, rollouts_s = meter.between("steady-end", "rollouts-end")
        whole, whole_s = meter.between("start", "end")
        return cpu_table(
            self.cfg.devices, meter.processes(), steady, steady_s, rollouts, rollouts_s,
            whole, whole_s,
        )  # fmt: skip

    def _quiet(self, what: str, timeout: float = 300.0) -> None:
        """Wait until the replicas are back to steady work (telemetry only): what a rollout
        left them (the last reports, log lines, telemetry batches) is done before the next part
        is measured. Once the steady window was measured, "steady" is its replica CPU rate plus
        a third (on a slow day steady ingest alone was above the fixed bound, and the wait ran
        to its timeout)."""
        meter = self.meter
        assert meter is not None
        limit = QUIET_CORES * self.cfg.replicas * max(1.0, self.cfg.devices / 10_000)
        if "steady-end" in meter.marks:
            steady, steady_s = meter.between("steady-start", "steady-end")
            limit = max(limit, QUIET_ABOVE_STEADY * steady["replicas"] / steady_s)
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            start = meter.totals()["replicas"]
            time.sleep(QUIET_WINDOW_S)
            meter.sample()
            rate = (meter.totals()["replicas"] - start) / QUIET_WINDOW_S
            if rate < limit:
                break
        self.say(f"replicas done with {what} after {time.monotonic() - began:.0f} s")

    def _wait(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            for r in self.replicas:
                if not r.alive and r.starts == 1:
                    raise SystemExit(f"replica {r.replica_id} died:\n{r.tail()}")
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.5)

    def _teardown(self, keep_work: bool) -> None:
        if self.meter is not None:
            self.meter.stop()
        if self.api is not None:
            self.api.close()
        for g in self.gateways:
            with contextlib.suppress(Exception):
                g.stop()
        for r in self.replicas:
            r.stop()
        if self.broker is not None:
            self.broker.stop()
        if self.reader is not None:
            self.reader.close()
        if self.db_url and not self.cfg.keep_db:
            drop_database(self.cfg.server_url, self.db_url)
        if keep_work or self.cfg.keep_db:
            self.say(f"logs kept in {self.work / 'logs'}")
        elif self._own_work:
            shutil.rmtree(self.work, ignore_errors=True)
