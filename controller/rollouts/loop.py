"""The rollout loop: in the one replica holding the ``rollouts`` lease, evaluate every active
rollout each tick and carry out what the state machine decides.

Everything it needs is in the database, so a restarted (or newly elected) controller carries on
where the last one stopped. Ordering makes that safe: a device's previous slot is stored before
its desired state changes; a rollback publishes the previous slots before it records the
rollout as rolled back; every publish is idempotent (an unchanged slot keeps its generation),
so repeating a step after a crash changes nothing on the devices.

A database error ends the tick and the next tick tries again; an outage is logged once
(:class:`controller.failure_log.FailureLog`), not at every tick. Any other exception ends
the loop's body; it runs under :class:`shared.supervision.Supervised` (``restart``: a rollout
loop that stopped would stop every rollout), which logs it with the thread's name and runs the
loop again after a back-off (1 s, doubling to 60 s), so one that keeps failing does not flood
the log four times a second, and its lease lapses for another replica to take over.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from controller.db.repository import Repository
from controller.db.rollout_store import RolloutStore
from controller.db.schema import utcnow
from controller.errors import Conflict, ControllerError
from controller.failure_log import FailureLog
from controller.fleet.agent_releases import AgentReleases
from controller.fleet.deployments import Fleet
from controller.rollouts import machine
from controller.rollouts.agent_waves import AgentWaves
from controller.rollouts.health import summarize
from controller.rollouts.model import (
    ACTIVE,
    AuditEntry,
    Rollout,
    RolloutState,
    Target,
    TargetStatus,
)
from controller.rollouts.targeting import Candidate, select
from controller.rollouts.wave_publisher import WavePublisher, nothing, slot_from_json
from shared.supervision import Supervised

logger = logging.getLogger(__name__)

LEASE = "rollouts"
START_CHUNK = 500
"""Devices of a wave prepared and published together (see ``_carry_out``)."""


class RolloutLoop:
    """Runs rollouts in a background thread while this replica holds the lease."""

    def __init__(
        self,
        store: RolloutStore,
        repo: Repository,
        fleet: Fleet,
        *,
        interval_s: float = 0.25,
        lease_ttl_s: float = 10.0,
        clock: Callable[[], datetime] = utcnow,
        holder: str | None = None,
        on_lead: Callable[[], None] | None = None,
        max_tick_s: float | None = None,
        agents: AgentReleases | None = None,
    ) -> None:
        self._store = store
        self._on_lead = on_lead
        """Called (on the loop's thread) each time this replica takes the lease."""
        self._repo = repo
        self._fleet = fleet
        self._publisher = WavePublisher(store, repo, fleet)
        self._agent_waves = AgentWaves(store, repo, fleet, agents) if agents else None
        """Agent rollouts' waves (None: this loop runs model rollouts only)."""
        self._interval = interval_s
        self._ttl = lease_ttl_s
        self._clock = clock
        self.holder = holder or f"controller-{uuid.uuid4().hex[:12]}"
        self._lease_until: datetime | None = None
        self._lease_lock = threading.Lock()
        self._max_tick = max_tick_s if max_tick_s is not None else max(60.0, 6 * lease_ttl_s)
        """A tick running longer than this is stuck: the lease is no longer renewed for it."""
        self._tick_began: float | None = None
        self._tick_ended: float | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._guard: Supervised | None = None
        self._renewer: Supervised | None = None

    @property
    def restarts(self) -> int:
        """How many times the loop was started again after a crash (since ``start``)."""
        return self._guard.restarts if self._guard is not None else 0

    def start(self) -> None:
        self._stop.clear()
        self._guard = Supervised("jetfleet-rollouts", self._run, policy="restart", stop=self._stop)
        self._guard.start()
        self._renewer = Supervised(
            "jetfleet-rollout-lease", self._renew, policy="restart", stop=self._stop
        )
        self._renewer.start()

    def stop(self) -> None:
        """Stop the thread and give the lease up, so another replica takes over at once."""
        self._stop.set()
        self._wake.set()
        if self._guard is not None:
            self._guard.join(30)
            self._guard = None
        if self._renewer is not None:
            self._renewer.join(30)
            self._renewer = None
        if self._lease_until is not None:
            try:
                self._store.release_lease(LEASE, self.holder)
            except ControllerError as exc:
                logger.warning("could not release the rollout lease: %s", exc)
            self._lease_until = None

    def wake(self) -> None:
        """Run the next tick now (after a create or an operator request)."""
        self._wake.set()

    @property
    def busy(self) -> bool:
        """A tick is running: work that can wait (a republish of every document) waits."""
        return self._tick_began is not None

    @property
    def leader(self) -> bool:
        return self._lease_until is not None and self._lease_until > self._clock()

    def _run(self) -> None:
        failures = FailureLog(logger, "rollout loop")
        while not self._stop.is_set():
            try:
                self.run_once()
            except ControllerError as exc:
                failures.failed(exc)
            else:
                failures.succeeded()
            self._wake.wait(self._interval)
            self._wake.clear()

    def run_once(self) -> bool:
        """One tick; False when another replica holds the lease."""
        now = self._clock()
        if not self._hold(now):
            return False
        self._tick_began = time.monotonic()
        try:
            for rollout_id in self._store.to_run():
                if self._stop.is_set():
                    break
                self._tick(self._store.get(rollout_id), self._clock())
        finally:
            self._tick_began, self._tick_ended = None, time.monotonic()
        return True

    def _hold(self, now: datetime, renew: bool = False) -> bool:
        with self._lease_lock:
            if (
                not renew
                and self._lease_until is not None
                and now < self._lease_until - timedelta(seconds=self._ttl / 2)
            ):
                return True
            if self._store.hold_lease(LEASE, self.holder, self._ttl, now):
                taken = self._lease_until is None
                self._lease_until = now + timedelta(seconds=self._ttl)
                if taken:
                    logger.info("%s runs the rollouts (lease taken)", self.holder)
                    if self._on_lead is not None:
                        self._on_lead()
                return True
            self._lease_until = None
            return False

    def _renew(self) -> None:
        """Renew the lease every third of its TTL while this replica leads, tick or no tick.

        Renewing only between ticks lost the lease in the middle of any tick longer than the
        TTL (a wave of thousands of devices, a busy host): another replica took over while
        this one was still publishing, and every takeover republishes every document. The
        lease is renewed only for a loop at work: a tick running for less than ``max_tick_s``
        (longer is taken for stuck), or one that ended within half the TTL (a loop waiting out
        a crash's back-off lets its lease lapse, as before).
        """
        while not self._stop.wait(self._ttl / 3):
            if self._lease_until is None:
                continue
            began, ended, now = self._tick_began, self._tick_ended, time.monotonic()
            if began is not None:
                working = now - began <= self._max_tick
            else:
                working = ended is not None and now - ended <= self._ttl / 2
            if not working:
                continue
            try:
                self._hold(self._clock(), renew=True)
            except ControllerError as exc:
                logger.warning("could not renew the rollout lease: %s", exc)

    def _tick(self, rollout: Rollout, now: datetime) -> None:
        if rollout.requested_op is not None:
            actor = rollout.requested_by or "operator"
            try:
                step = machine.apply_op(rollout, rollout.requested_op, now, actor)
            except Conflict as exc:
                entry = AuditEntry(now, actor, "op", rollout.state.value, None, f"ignored: {exc}")
                self._store.clear_request(rollout.id, entry)
                return
            self._carry_out(rollout, step, now, clear_request=True)
            rollout = self._store.get(rollout.id)
        if rollout.state not in ACTIVE:
            return
        late = rollout.spec.targets.include_late and rollout.state is RolloutState.RUNNING
        if late and self._enrol_late(rollout):
            rollout = self._store.get(rollout.id)
        step = machine.advance(rollout, self._observe(rollout), now)
        self._carry_out(rollout, step, now)

    def _waves(self, rollout: Rollout) -> WavePublisher:
        if rollout.spec.kind != "agent":
            return self._publisher
        if self._agent_waves is None:
            raise ControllerError(f"rollout {rollout.id} is an agent rollout: not enabled here")
        return self._agent_waves

    def _observe(self, rollout: Rollout) -> dict[str, machine.Observation]:
        spec = rollout.spec
        waves = self._waves(rollout)
        if isinstance(waves, AgentWaves):
            return waves.observe(rollout)
        flying = [
            t
            for t in rollout.targets
            if t.status is TargetStatus.IN_PROGRESS and t.generation is not None
        ]
        if not flying:
            return {}
        observed = self._repo.observed([t.device_id for t in flying], spec.model)
        since = {t.device_id: t.validated_at for t in flying if t.validated_at is not None}
        windows = self._store.telemetry_since({k: v for k, v in since.items() if v is not None})
        result: dict[str, machine.Observation] = {}
        for target in flying:
            if target.device_id not in observed:
                continue
            generation, slot = observed[target.device_id]
            health = None
            if target.device_id in windows:
                health = summarize(windows[target.device_id], spec.model, spec.version)
            result[target.device_id] = machine.Observation.of(generation, slot, health)
        return result

    def _enrol_late(self, rollout: Rollout) -> bool:
        present = {t.device_id for t in rollout.targets}
        claimed = self._store.claims()
        devices = [d for d in self._repo.devices() if d.id not in present and d.id not in claimed]
        late = select(rollout.spec.targets, [Candidate.of(d) for d in devices])
        if not late:
            return False
        wave = max(rollout.waves - 1, 0)
        added = self._store.add_targets(rollout.id, [Target(d, wave) for d in late])
        if added:
            logger.info("rollout %s: %d late device(s) enrolled", rollout.id, len(added))
        return bool(added)

    def _carry_out(
        self, rollout: Rollout, step: machine.Step, now: datetime, clear_request: bool = False
    ) -> None:
        spec = rollout.spec
        by_id = {t.device_id: t for t in rollout.targets}
        targets = dict(step.changed)
        waves = self._waves(rollout)
        if step.revert and isinstance(waves, AgentWaves):
            waves.withdraw(step.revert)
        elif step.revert:
            previous = {
                t.device_id: slot_from_json((t.previous or {}).get("slot")) for t in step.revert
            }
            self._fleet.restore(spec.model, previous)
        self._store.save(
            rollout,
            state=step.state,
            reason=step.reason,
            current_wave=step.current_wave,
            targets=targets.values(),
            audit=step.audit,
            now=now,
            clear_request=clear_request,
        )
        # A wave's devices go out a chunk at a time: each chunk's previous slots are stored,
        # then its documents published, so the first gateways start while the leader prepares
        # the rest (a 5,000-device wave published its first document 7-13 s after it started
        # at the scale bench). The broker acknowledges a chunk while the next one is prepared;
        # a chunk's generations are stored once its acknowledgements came. A leader that dies
        # or stops between chunks leaves the rest in progress without a generation: the next
        # tick (here or in the next leader) prepares and publishes them.
        pending: Callable[[], None] = nothing
        try:
            for first in range(0, len(step.start), START_CHUNK):
                if self._stop.is_set():
                    break
                chunk = step.start[first : first + START_CHUNK]
                prepared = waves.prepare(rollout, chunk, targets, by_id, now)
                self._store.save_targets(rollout.id, list(prepared.values()))
                earlier, pending = (
                    pending,
                    waves.send(rollout, [prepared[d] for d in chunk], now),
                )
                earlier()
        finally:
            pending()
