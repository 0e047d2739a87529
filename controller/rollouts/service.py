"""Rollout operations for the API: create (targets resolved and snapshotted), show, list,
and operator requests (pause, resume, abort, rollback, retry) handed to the rollout loop.

Every change of a rollout's state is made by the loop (one writer, in the leader replica); a
request is recorded here, the loop applies it on its next tick, and the call waits briefly so
the answer usually shows the new state already.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import datetime

from controller.db.repository import Repository
from controller.db.rollout_store import RolloutStore
from controller.db.schema import utcnow
from controller.errors import ControllerError, InvalidInput, NotFound
from controller.fleet.agent_releases import AgentReleases
from controller.fleet.catalog import Catalog
from controller.fleet.configs import Configs
from controller.fleet.warmup_gate import refuse_unknown_warmup
from controller.records import DeviceRecord
from controller.rollouts import machine
from controller.rollouts.agent_plan import agent_skips, check_agent_spec
from controller.rollouts.delegation import delegation_warning
from controller.rollouts.model import (
    AuditEntry,
    Operation,
    Rollout,
    RolloutSpec,
    RolloutState,
    Target,
    TargetStatus,
)
from controller.rollouts.targeting import Candidate, check_spec, select
from controller.rollouts.waves import parse_waves, plan_waves
from shared.delegate import DelegateConfig


class RolloutService:
    """Create rollouts and pass operator requests to the loop."""

    def __init__(
        self,
        store: RolloutStore,
        repo: Repository,
        catalog: Catalog,
        configs: Configs,
        clock: Callable[[], datetime] = utcnow,
        wake: Callable[[], None] = lambda: None,
        request_wait_s: float = 5.0,
        agents: AgentReleases | None = None,
    ) -> None:
        self.store = store
        self._agents = agents
        self._repo = repo
        self._catalog = catalog
        self._configs = configs
        self._clock = clock
        self.wake = wake
        self._wait_s = request_wait_s

    def delegation_warnings(self, spec: RolloutSpec) -> list[str]:
        """One sentence per target device that cannot build the model with its runtime."""
        if spec.kind == "agent":
            return []
        record = self._catalog.require_version(spec.model, spec.version)
        layers = self._configs.require_layers(spec.config) if spec.config else None
        devices = self._repo.devices()
        matched = set(select(spec.targets, [Candidate.of(d) for d in devices]))
        warnings = []
        for device in devices:
            if device.id not in matched:
                continue
            delegate = (
                Configs.resolve_for(layers, device, record).delegate
                if layers is not None
                else DelegateConfig()
            )
            ref = f"{spec.model}:{spec.version}"
            warning = delegation_warning(
                device.id,
                device.device_facts,
                delegate,
                record.analysis,
                ref,
                analysis_state=record.analysis_state,
                analysis_error=record.analysis_error,
            )
            if warning:
                warnings.append(warning)
        return warnings

    def create(self, spec: RolloutSpec, actor: str = "operator") -> Rollout:
        """Resolve and snapshot the targets, plan the waves, store the rollout (pending); a
        version whose warm-up inputs are unknown is refused (:class:`Conflict`). An agent
        rollout skips the devices that cannot take its release, and is refused when the
        release is older than a target's agent unless it allows a downgrade."""
        record = None
        if spec.kind == "agent":
            check_agent_spec(spec)
        else:
            record = self._catalog.require_version(spec.model, spec.version)
            refuse_unknown_warmup(record)
        layers = self._configs.require_layers(spec.config) if spec.config else None
        steps = parse_waves(spec.strategy.waves)
        check_spec(spec.targets)
        devices = self._repo.devices()
        known = {d.id for d in devices}
        unknown = sorted((set(spec.targets.devices) | set(spec.strategy.canary)) - known)
        if unknown:
            raise NotFound(f"unknown device(s) {', '.join(unknown)}: see `jetfleet devices ls`")
        matched = set(select(spec.targets, [Candidate.of(d) for d in devices]))
        if not matched and not spec.targets.include_late:
            raise NotFound("no device matches the rollout's targets: check the selector")
        skipped: list[Target] = []
        if spec.kind == "agent":
            skipped += self._agent_skips(spec, [d for d in devices if d.id in matched])
        for device in devices:
            if device.id not in matched or layers is None or record is None:
                continue
            problems = Configs.resolve_for(layers, device, record).problems
            if problems:
                why = f"config '{spec.config}' does not fit: " + "; ".join(problems)
                skipped.append(Target(device.id, 0, TargetStatus.SKIPPED, why))
        skip_ids = {t.device_id for t in skipped}
        canary = [d for d in spec.strategy.canary if d not in skip_ids]
        if set(canary) - matched:
            outside = ", ".join(sorted(set(canary) - matched))
            raise InvalidInput(f"canary device(s) {outside} do not match the rollout's targets")
        eligible = sorted(matched - skip_ids)
        waves = plan_waves(eligible, steps, canary)
        targets = [Target(d, i) for i, wave in enumerate(waves) for d in wave]
        now = self._clock()
        rollout = Rollout(
            id=f"ro-{uuid.uuid4().hex[:10]}",
            spec=spec,
            state=RolloutState.PENDING,
            created_at=now,
            updated_at=now,
            created_by=actor,
            reason="created",
            waves=max(len(waves), 1),
            targets=(*targets, *skipped),
        )
        audit = [
            AuditEntry(
                now,
                actor,
                "rollout",
                None,
                RolloutState.PENDING.value,
                f"created: {_what(spec)} to {len(targets)} device(s) in "
                f"{len(waves)} wave(s), {len(skipped)} skipped",
            )
        ]
        audit += [
            AuditEntry(now, actor, "target", None, t.status.value, t.reason or "", t.device_id)
            for t in skipped
        ]
        self.store.create(rollout, audit)
        self.wake()
        return self.store.get(rollout.id)

    def _agent_skips(self, spec: RolloutSpec, devices: list[DeviceRecord]) -> list[Target]:
        if self._agents is None:
            raise ControllerError("agent rollouts are not enabled on this controller")
        releases = self._agents.require(spec.version)
        reports = self._agents.reports([d.id for d in devices])
        return agent_skips(spec, devices, reports, releases)

    def get(self, rollout_id: str) -> Rollout:
        return self.store.get(rollout_id)

    def all(self) -> list[Rollout]:
        return self.store.all()

    def audit(self, rollout_id: str, limit: int = 1000) -> list[AuditEntry]:
        return self.store.audit(rollout_id, limit)

    def request(self, rollout_id: str, op: Operation, actor: str = "operator") -> Rollout:
        """Ask the loop to apply ``op``; wait up to a few seconds for it, return the rollout."""
        rollout = self.store.get(rollout_id)
        machine.allowed(rollout, op)
        if not rollout.state.active:
            # a finished rollout takes its devices back for a retry or a rollback
            if op is Operation.RETRY:
                wanted = [t.device_id for t in rollout.targets if t.status is TargetStatus.FAILED]
            else:
                wanted = [t.device_id for t in rollout.targets if t.updated]
            self.store.claim(rollout_id, wanted)
        self.store.request(rollout_id, op, actor)
        self.wake()
        deadline = time.monotonic() + self._wait_s
        while time.monotonic() < deadline:
            current = self.store.get(rollout_id)
            if current.requested_op is None:
                return current
            time.sleep(0.05)
        return self.store.get(rollout_id)


def _what(spec: RolloutSpec) -> str:
    """``model:version``, or ``agent release X`` (the audit trail's words)."""
    if spec.kind == "agent":
        return f"agent release {spec.version}"
    return f"{spec.model}:{spec.version}"
