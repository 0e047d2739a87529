"""Playing the fault schedule: each fault on its own thread, holding its resources' locks,
and what each kind of fault does (:class:`FaultPlayer`, the base of :class:`bench.soak.run.Soak`).

Each fault runs from its scheduled time on its own thread, so an outage (broker down, a
partition, a full disk, PostgreSQL down) lasts its full length while the next faults start; a
fault takes the locks of the resources it needs (:func:`bench.soak.faults.resources`, central
first), so two faults on one resource never run together even when one runs late. Operator
actions run on the main thread. A fault that fails (an agent that does not serve again) fails
the run once every fault thread has ended.

What the faults do:

- ``broker_restart``: SIGTERM to the bench's Mosquitto, started again at once (persistence on).
- ``broker_down``: Mosquitto stopped for the outage, then started.
- ``controller_kill``: ``kill -9`` of ``jetfleet serve``, started again on the same port.
- ``postgresql_restart``: ``pg_ctl stop -m fast`` of the run's own cluster (sessions cut), down
  for the outage, ``pg_ctl start``; one agent is given a new version just before the stop (its
  download, swap and report fall in the outage); then the bench waits for the API, for
  telemetry of every agent not in an outage of its own, and for that agent's report, and notes
  what the controller logged meanwhile.
- ``agent_kill_mid_download`` / ``agent_kill_mid_swap``: a deploy of another version to one
  agent, ``kill -9`` once it reports that phase (or 0.4 s after the deploy), started again.
- ``link_partition``: the agent's TCP proxy to the broker drops its connections and refuses new
  ones, or holds them (stops forwarding), for the outage.
- ``state_dir_full``: the agent's tmpfs state directory filled to its last byte for the outage.
"""

from __future__ import annotations

import contextlib
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from bench.soak import faults as F
from bench.soak.disk import fill_to_last_byte
from bench.soak.logs import log_summary, mark
from bench.soak.measure import ProcStat, Window, stored_since
from bench.soak.parts import MODEL, AgentProc, Broker, ControllerProc, PhaseWatch
from bench.soak.proxy import DROP, FORWARD, HOLD
from controller.demo.fleet import wait_for
from tests.pg_cluster import Cluster

VERSIONS = ("1.0.0", "2.0.0", "3.0.0")
RESTART_SETTLE_S = 15.0
"""After a restart, the start figures are taken this much later (peers reconnected)."""
RECOVERY_S = 120.0
"""How long the bench waits, after PostgreSQL is back, for the API and telemetry to recover."""


class FaultPlayer:
    """The faults and the schedule's playing; :class:`bench.soak.run.Soak` supplies the fleet."""

    agents: list[AgentProc]
    broker: Broker
    controller: ControllerProc | None
    pg: Cluster | None
    db_url: str
    watch: PhaseWatch | None
    windows: list[Window]
    mounted: list[Path]
    start_stats: dict[str, tuple[int, ProcStat]]
    start_basis: dict[str, str]
    """When the start figures of a restarted agent's last life were taken."""
    stopping: threading.Event
    """Set when the schedule is over and the end figures are taken."""
    t0: float

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._failures: list[BaseException] = []
        self.in_outage: set[int] = set()
        """Agents whose link is partitioned or state directory full right now."""

    if TYPE_CHECKING:

        def note(self, text: str) -> None: ...
        def call(self, method: str, path: str, **kw: Any) -> httpx.Response: ...
        def api(self) -> httpx.Client: ...
        def deploy(self, version: str, device: str | None = None) -> None: ...
        def device_converged(self, device: str) -> bool: ...
        def act(self, step: F.Step) -> None: ...
        def stat(
            self, name: str, pid: int | None, state_dir: Path | None = None, after_s: float = 0.0
        ) -> None: ...

    def kill_agent(self, agent: AgentProc, phases: set[str], what: str) -> None:
        assert self.watch is not None
        current = self.call("GET", f"/devices/{agent.device_id}").json()
        desired = {s["name"]: s["version"] for s in current["desired"]}.get(MODEL)
        version = next(v for v in VERSIONS if v != desired)
        self.watch.clear(agent.device_id)
        self.deploy(version, agent.device_id)
        # this small model downloads and swaps in well under a second and the agent reports
        # no phase in between most times: wait briefly for one, else kill 0.4 s after deploy
        phase = self.watch.wait_phase(agent.device_id, phases, 0.4)
        start = time.monotonic()
        agent.kill()
        seen = self.watch.phases.get(agent.device_id, (0.0, "none"))[1]
        missed = "" if phase else f"; {sorted(phases)} not seen: killed 0.4 s after the deploy"
        self.note(
            f"{what}: kill -9 {agent.device_id} while deploying {version} "
            f"(last reported phase {seen}{missed})"
        )
        agent.start()
        assert agent.proc is not None
        wait_for(f"{agent.device_id} to serve again", agent.ready, 120, [agent.proc])
        self.windows.append(Window(agent.index, start, time.monotonic()))
        self.note(f"{agent.device_id} serves again, {time.monotonic() - start:.1f}s after the kill")
        self.stat(agent.device_id, agent.pid, agent.state_dir, after_s=RESTART_SETTLE_S)
        self.stat_after_first_deploy(agent)

    def stat_after_first_deploy(self, agent: AgentProc) -> None:
        """Take the start figures of a restarted agent again once it has finished a deploy in
        its new life (:data:`RESTART_SETTLE_S` after it serves a version it did not boot with).

        The first life's start figures are taken after the setup deploy. A restarted agent
        serves its cached model without downloading, validating or swapping, so figures taken
        at its restart sit below that plateau and the first swap of the new life (two sessions
        side by side, the allocator's high-water mark) reads as growth: 108.6 -> 119.8 MiB for
        a restarted agent while one never restarted went 118.0 -> 119.6 MiB over the same 30
        minutes and ~15 deploys (seed 1, 2026-12-02). Without a deploy in the new life, the
        figures taken at the restart stay.
        """
        pid = agent.pid

        def booted_version() -> str | None:
            r = self.call("GET", f"/devices/{agent.device_id}")
            if r.status_code != 200:
                return None
            slots = r.json()["reported"]
            return next((s["active_version"] for s in slots if s["name"] == MODEL), None)

        def watch() -> None:
            with contextlib.suppress(Exception):
                booted = booted_version()
                while agent.pid == pid and not self.stopping.is_set():
                    if self.device_converged(agent.device_id) and booted_version() != booted:
                        if self.stopping.wait(RESTART_SETTLE_S) or agent.pid != pid:
                            return
                        self.stat(agent.device_id, pid, agent.state_dir)
                        self.start_basis[agent.device_id] = "after the first deploy of its life"
                        return
                    self.stopping.wait(2.0)

        self.start_basis[agent.device_id] = f"{RESTART_SETTLE_S:.0f} s after it served again"
        threading.Thread(target=watch, name=f"first-deploy-{agent.device_id}", daemon=True).start()

    def fill(self, agent: AgentProc, seconds: float) -> None:
        if agent.state_dir not in self.mounted:
            self.note(f"{F.DISK_FULL} {agent.device_id}: not done (no tmpfs: not root)")
            return
        filler = fill_to_last_byte(agent.state_dir / "soak-filler")
        self.in_outage.add(agent.index)
        self.note(f"{F.DISK_FULL} {agent.device_id}: state directory full for {seconds:.0f}s")
        time.sleep(seconds)
        with contextlib.suppress(OSError):
            filler.unlink()
        self.in_outage.discard(agent.index)
        self.note(f"{F.DISK_FULL} {agent.device_id}: space back")

    def partition(self, agent: AgentProc, seconds: float, index: int) -> None:
        mode = DROP if index % 2 == 0 else HOLD
        agent.proxy.set_mode(mode)
        self.in_outage.add(agent.index)
        self.note(f"link of {agent.device_id} partitioned ({mode}) for {seconds:.0f}s")
        time.sleep(seconds)
        agent.proxy.set_mode(FORWARD)
        self.in_outage.discard(agent.index)
        self.note(f"link of {agent.device_id} back")

    def restart_postgresql(self, seconds: float) -> None:
        """Stop PostgreSQL (fast: sessions cut), keep it down ``seconds``, start it; then wait
        until the API answers, every agent not in an outage of its own has telemetry stored
        again, and the agent given a new version just before the stop (its download, swap and
        report fall in the outage) is stored as serving it; say what the controller logged
        meanwhile."""
        assert self.pg is not None
        assert self.controller is not None
        log = self.controller.proc.log if self.controller.proc else None
        since = mark(log)
        probe = next((a for a in self.agents if a.index not in self.in_outage), None)
        moved = ""
        if probe is not None:
            current = self.call("GET", f"/devices/{probe.device_id}").json()
            desired = {s["name"]: s["version"] for s in current["desired"]}.get(MODEL)
            version = next(v for v in VERSIONS if v != desired)
            self.deploy(version, probe.device_id)
            moved = f"{probe.device_id} given {version} just before the stop"
        began = time.monotonic()
        self.pg.stop()
        self.note(f"PostgreSQL stopped (pg_ctl stop -m fast), down for {seconds:.0f}s")
        time.sleep(seconds)
        self.pg.start()
        back_wall = datetime.now(timezone.utc)
        back = time.monotonic()
        self.note(f"PostgreSQL started ({back - began:.1f}s after the stop)")
        wait_for("the API after PostgreSQL's restart", self._api_answers, RECOVERY_S)
        api_s = time.monotonic() - back
        waiting = [a for a in self.agents if a.index not in self.in_outage]
        try:
            wait_for(
                "telemetry stored again after PostgreSQL's restart",
                lambda: stored_since(self.db_url, [a.device_id for a in waiting], back_wall),
                RECOVERY_S,
                interval=1.0,
            )
            took = time.monotonic() - back
            stored = f"telemetry of {len(waiting)} agents stored again {took:.1f}s after"
        except Exception as exc:  # noqa: BLE001 - reported; the loss count says the rest
            stored = f"telemetry NOT stored again within {RECOVERY_S:.0f}s: {exc}"
        if probe is not None:
            try:
                wait_for(
                    f"{probe.device_id}'s report after PostgreSQL's restart",
                    lambda: self.device_converged(probe.device_id),
                    RECOVERY_S,
                    interval=0.5,
                )
                moved += f", stored as serving it {time.monotonic() - back:.1f}s after"
            except Exception as exc:  # noqa: BLE001 - reported; the run's convergence says more
                moved += f", its report NOT stored within {RECOVERY_S:.0f}s: {exc}"
        self.note(
            f"after PostgreSQL's restart: API answered {api_s:.1f}s after; {stored}; {moved}; "
            f"controller log meanwhile: {log_summary(log, since)}"
        )

    def _api_answers(self) -> bool:
        assert self.controller is not None
        try:
            with self.api() as api:
                return api.get("/devices").status_code == 200
        except httpx.HTTPError:
            return False

    def fault(self, step: F.Step, index: int) -> None:
        agent = self.agents[int(step.target)] if step.target else None
        if step.kind == F.BROKER_RESTART:
            self.broker.stop()
            self.broker.check_saved()
            self.broker.start()
            self.note("broker restarted")
            self.stat("mosquitto", self.broker.pid, after_s=RESTART_SETTLE_S)
        elif step.kind == F.BROKER_DOWN:
            self.broker.stop()
            self.broker.check_saved()
            self.note(f"broker down for {step.duration_s:.0f}s")
            time.sleep(step.duration_s)
            self.broker.start()
            self.note("broker up")
            self.stat("mosquitto", self.broker.pid, after_s=RESTART_SETTLE_S)
        elif step.kind == F.CONTROLLER_KILL:
            assert self.controller is not None
            self.controller.kill()
            self.note("controller killed (kill -9)")
            self.controller.start()
            self.note("controller restarted")
            self.stat("controller", self.controller.pid, after_s=RESTART_SETTLE_S)
        elif step.kind == F.POSTGRESQL_RESTART:
            if self.pg is None:
                self.note(f"{F.POSTGRESQL_RESTART}: not done (--db: not the bench's server)")
                return
            self.restart_postgresql(step.duration_s)
        elif step.kind == F.AGENT_KILL_SWAP and agent:
            self.kill_agent(agent, {"validating", "swapping"}, step.kind)
        elif step.kind == F.AGENT_KILL_DOWNLOAD and agent:
            self.kill_agent(agent, {"downloading"}, step.kind)
        elif step.kind == F.PARTITION and agent:
            self.partition(agent, step.duration_s, index)
        elif step.kind == F.DISK_FULL and agent:
            self.fill(agent, step.duration_s)

    def _run_fault(self, step: F.Step, index: int, ends: list[float]) -> None:
        """One fault on its thread: take its resources' locks (central first), run it."""
        locks = [self._locks.setdefault(name, threading.Lock()) for name in F.resources(step)]
        taken: list[threading.Lock] = []
        try:
            waited = time.monotonic()
            for lock in locks:
                lock.acquire()
                taken.append(lock)
            late = time.monotonic() - waited
            if late > 1.0:
                self.note(f"{step.kind}: started {late:.1f}s late (its resources were busy)")
            self.fault(step, index)
        except BaseException as exc:  # noqa: BLE001 - raised again by play()
            self._failures.append(exc)
            self.note(f"{step.kind} failed: {exc}")
        finally:
            ends.append(time.monotonic())
            for lock in reversed(taken):
                lock.release()

    def play(self, steps: list[F.Step]) -> float:
        """Play the schedule; the monotonic time the last fault ended."""
        self.t0 = time.monotonic()
        ends: list[float] = [self.t0]
        threads: list[threading.Thread] = []
        for i, step in enumerate(steps):
            if self._failures:
                break
            delay = self.t0 + step.at_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if step.is_fault:
                thread = threading.Thread(
                    target=self._run_fault, args=(step, i, ends), name=f"fault-{i}", daemon=True
                )
                thread.start()
                threads.append(thread)
            else:
                self.act(step)
        for thread in threads:
            thread.join()
        if self._failures:
            raise self._failures[0]
        return max(ends)
