"""A chunk of a rollout wave's devices, for the rollout loop: prepared, published, recorded.

Before publishing, :meth:`WavePublisher.prepare` records each starting device's previous slot
(:func:`slot_json`, what a rollback puts back with :func:`slot_from_json`) and its health
baseline (the telemetry of :data:`BASELINE_WINDOW_S` before); :meth:`WavePublisher.send` stores
and publishes the chunk's documents and returns the call that waits for the broker's
acknowledgements and then stores each target's generation, or why it failed. The loop
(:mod:`controller.rollouts.loop`) decides what goes out and when.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from controller.db.repository import Repository
from controller.db.rollout_store import RolloutStore
from controller.errors import InvalidInput
from controller.fleet.deployments import Fleet
from controller.fleet.desired import PlannedSlot
from controller.rollouts import machine
from controller.rollouts.health import summarize
from controller.rollouts.model import AuditEntry, Rollout, Target, TargetStatus
from shared.delegate import DelegateConfig

BASELINE_WINDOW_S = 3600.0
"""Telemetry of the last hour before a device's update is its baseline."""


def slot_json(slot: PlannedSlot | None) -> dict[str, Any] | None:
    """A stored slot as JSON (what a rollback puts back)."""
    if slot is None:
        return None
    return {
        "name": slot.name,
        "version": slot.version,
        "sha256": slot.sha256,
        "size": slot.size,
        "delegate": slot.delegate.model_dump(mode="json"),
        "model_version_id": slot.model_version_id,
        "config": slot.config,
    }


def slot_from_json(data: dict[str, Any] | None) -> PlannedSlot | None:
    """The inverse of :func:`slot_json`."""
    if data is None:
        return None
    return PlannedSlot(
        name=data["name"],
        version=data["version"],
        sha256=data["sha256"],
        size=int(data["size"]),
        delegate=DelegateConfig.model_validate(data["delegate"]),
        model_version_id=int(data["model_version_id"]),
        config=data.get("config"),
    )


class WavePublisher:
    """Prepares, publishes and records the devices a rollout starts, a chunk at a time."""

    def __init__(self, store: RolloutStore, repo: Repository, fleet: Fleet) -> None:
        self._store = store
        self._repo = repo
        self._fleet = fleet

    def prepare(
        self,
        rollout: Rollout,
        start: Sequence[str],
        changed: dict[str, Target],
        by_id: dict[str, Target],
        now: datetime,
    ) -> dict[str, Target]:
        """Record each starting device's previous slot and baseline (before publishing)."""
        spec = rollout.spec
        fresh = [d for d in start if (changed.get(d) or by_id[d]).previous is None]
        planned = self._repo.planned(fresh, spec.model)
        windows = self._store.telemetry_before(fresh, now, BASELINE_WINDOW_S)
        result: dict[str, Target] = {}
        for device_id in start:
            target = changed.get(device_id) or by_id[device_id]
            if target.previous is None:
                old = planned.get(device_id)
                baseline = summarize(
                    windows.get(device_id, []), spec.model, old.version if old else None
                )
                target = replace(
                    target,
                    previous={"slot": slot_json(old)},
                    baseline=baseline if baseline.requests else None,
                )
            result[device_id] = target
        return result

    def send(self, rollout: Rollout, targets: list[Target], now: datetime) -> Callable[[], None]:
        """Store and publish these targets' documents; the returned call waits for the broker's
        acknowledgements, then stores each target's generation (or why it failed)."""
        spec = rollout.spec
        ids = [t.device_id for t in targets]
        generations: dict[str, int] = {}
        failures: dict[str, str] = {}
        unchanged: list[str] = []
        acknowledged: Callable[[], None] = nothing
        try:
            result, acknowledged = self._fleet.send_to(ids, spec.model, spec.version, spec.config)
            generations = {c.device_id: c.generation for c in result.devices}
            unchanged = [c.device_id for c in result.devices if not c.changed]
        except InvalidInput:
            for device_id in ids:  # find the devices the config does not fit
                try:
                    one = self._fleet.deploy_to([device_id], spec.model, spec.version, spec.config)
                    generations[device_id] = one.devices[0].generation
                    unchanged += [c.device_id for c in one.devices if not c.changed]
                except InvalidInput as exc:
                    failures[device_id] = str(exc)

        def finish() -> None:
            acknowledged()
            # A device whose document was already stored was started before by a leader that
            # died (kill -9) or lost the broker between storing it and the broker's
            # acknowledgement: send_to publishes only what changed, so publish it again (same
            # generation).
            self._fleet.republish(unchanged)
            self.record(rollout, targets, generations, failures, now)

        return finish

    def record(
        self,
        rollout: Rollout,
        targets: list[Target],
        generations: dict[str, int],
        failures: dict[str, str],
        now: datetime,
        status: TargetStatus = TargetStatus.FAILED,
    ) -> None:
        """Store the generation published to each target, or why it was not (those targets
        end with ``status``)."""
        updated: list[Target] = []
        audit: list[AuditEntry] = []
        for target in targets:
            if target.device_id in generations:
                updated.append(replace(target, generation=generations[target.device_id]))
            elif target.device_id in failures:
                why = failures[target.device_id]
                updated.append(replace(target, status=status, reason=why, finished_at=now))
                audit.append(
                    AuditEntry(
                        now,
                        machine.LOOP,
                        "target",
                        "in_progress",
                        status.value,
                        why,
                        target.device_id,
                    )
                )
        self._store.save_targets(rollout.id, updated)
        if audit:
            current = self._store.get(rollout.id)
            self._store.save(
                current,
                state=current.state,
                reason=current.reason,
                current_wave=current.current_wave,
                targets=[],
                audit=audit,
                now=now,
            )


def nothing() -> None:
    """Nothing to wait for."""
