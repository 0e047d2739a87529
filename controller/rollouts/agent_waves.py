"""The devices of an agent rollout's wave, for the rollout loop: observed, prepared, ordered.

Like :class:`controller.rollouts.wave_publisher.WavePublisher` for a model, with an agent
release instead of a slot: :meth:`AgentWaves.prepare` records the release each starting device
runs (``previous``) and its inference health over every model before (its baseline);
:meth:`AgentWaves.send` stores each device's order of the release built for it,
stores a new generation of its desired document and publishes it (a device that can no
longer take the order, say its facts changed since the rollout was created, is skipped
with the reason); :meth:`AgentWaves.withdraw` takes the order out of the documents of devices
that have not confirmed when the rollout stops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from controller.db.repository import Repository
from controller.db.rollout_store import RolloutStore
from controller.fleet.agent_releases import AgentReleases
from controller.fleet.deployments import Fleet
from controller.rollouts import agent_gate, machine
from controller.rollouts.agent_gate import AgentObservation
from controller.rollouts.health import summarize
from controller.rollouts.model import Rollout, Target, TargetStatus
from controller.rollouts.wave_publisher import BASELINE_WINDOW_S, WavePublisher


class AgentWaves(WavePublisher):
    """Observes, prepares and orders the devices an agent rollout starts."""

    def __init__(
        self, store: RolloutStore, repo: Repository, fleet: Fleet, agents: AgentReleases
    ) -> None:
        super().__init__(store, repo, fleet)
        self._agents = agents

    def observe(self, rollout: Rollout) -> dict[str, machine.Observation]:
        """What each device of the rollout in flight reports of its agent, and its inference
        health (every model) since it confirmed the new release."""
        flying = [
            t
            for t in rollout.targets
            if t.status is TargetStatus.IN_PROGRESS and t.generation is not None
        ]
        if not flying:
            return {}
        reports = self._agents.reports([t.device_id for t in flying])
        since = {t.device_id: t.validated_at for t in flying if t.validated_at is not None}
        windows = self._store.telemetry_since({k: v for k, v in since.items() if v is not None})
        result: dict[str, machine.Observation] = {}
        for target in flying:
            report = reports.get(target.device_id)
            if report is None:
                continue
            health = None
            if target.device_id in windows:
                health = summarize(windows[target.device_id], None, None)
            agent = AgentObservation(
                report.observed_generation, report.agent_version, report.update, report.slots
            )
            result[target.device_id] = machine.Observation(
                observed_generation=report.observed_generation, health=health, agent=agent
            )
        return result

    def prepare(
        self,
        rollout: Rollout,
        start: Sequence[str],
        changed: dict[str, Target],
        by_id: dict[str, Target],
        now: datetime,
    ) -> dict[str, Target]:
        """Record the release each starting device runs and its baseline (before ordering)."""
        fresh = [d for d in start if (changed.get(d) or by_id[d]).previous is None]
        reports = self._agents.reports(fresh)
        windows = self._store.telemetry_before(fresh, now, BASELINE_WINDOW_S)
        result: dict[str, Target] = {}
        for device_id in start:
            target = changed.get(device_id) or by_id[device_id]
            if target.previous is None:
                report = reports.get(device_id)
                baseline = summarize(windows.get(device_id, []), None, None)
                target = replace(
                    target,
                    previous={"agent": report.agent_version if report else None},
                    baseline=baseline if baseline.requests else None,
                )
            result[device_id] = target
        return result

    def send(self, rollout: Rollout, targets: list[Target], now: datetime) -> Callable[[], None]:
        """Store and publish these devices' orders; the returned call waits for the broker's
        acknowledgements, then stores each target's generation (or why it was skipped)."""
        spec = rollout.spec
        ids = [t.device_id for t in targets]
        releases = self._agents.store.releases(spec.version)
        devices = {d.id: d for d in self._repo.devices(ids)}
        reports = self._agents.reports(ids)
        ordered: dict[str, int] = {}
        skipped: dict[str, str] = {}
        for device_id in ids:
            device = devices.get(device_id)
            report = reports.get(device_id)
            running = report.agent_version if report is not None else None
            if device is None:
                skipped[device_id] = "the device is gone"
                continue
            # a device that runs the release already (a leader died after ordering it) is
            # ordered again: it ignores the order and its confirmation is judged as usual
            why = agent_gate.why_not(device, running, releases, spec.version, ordering=True)
            downgrade = agent_gate.downgrade(running, spec.version)
            if why is None and downgrade and not spec.allow_downgrade:
                why = (
                    f"release {spec.version} is older than its agent {running} and the "
                    "rollout does not allow a downgrade"
                )
            if why is not None:
                skipped[device_id] = why
                continue
            release = agent_gate.pick(device, releases)
            if isinstance(release, str):  # why_not would have said so
                skipped[device_id] = release
                continue
            ordered[device_id] = release.id
        self._agents.set_orders(
            list(ordered),
            ordered,
            spec.allow_downgrade,
            agent_gate.confirm_bound(spec.strategy.device_timeout_s),
        )
        deployment, acknowledged = self._fleet.send_touched(list(ordered))
        generations = {c.device_id: c.generation for c in deployment.devices}

        def finish() -> None:
            acknowledged()
            self.record(rollout, targets, generations, skipped, now, TargetStatus.SKIPPED)

        return finish

    def withdraw(self, targets: Sequence[Target]) -> None:
        """Take the order out of these devices' documents (published at a new generation)."""
        ids = [t.device_id for t in targets]
        self._agents.set_orders(ids, {}, False)
        _, acknowledged = self._fleet.send_touched(ids)
        acknowledged()
