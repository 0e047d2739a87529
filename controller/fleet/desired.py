"""Desired-slot planning (pure): what a device must serve after a deploy or an undeploy.

Deploying model B to a device that serves A adds a slot; deploying a new version (or a new
delegate config) of A replaces A's slot in place; deploying exactly what is there changes nothing,
so the device's generation is not bumped and no agent does needless work.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from controller.records import DocumentSignatures
from controller.records import PlannedSlot as PlannedSlot
from controller.records import SlotPlan as SlotPlan
from shared.agent_releases import AgentReleaseOrder
from shared.delegate import DelegateConfig
from shared.jobs import Job
from shared.messages import ArtifactRef, DesiredState, ModelSlot, ServingSettings


def plan_deploy(current: Sequence[PlannedSlot], slot: PlannedSlot) -> SlotPlan:
    """Slots after deploying ``slot``: added, replacing the same model's slot, or unchanged."""
    slots = list(current)
    for index, existing in enumerate(slots):
        if existing.name == slot.name:
            if existing.same_as(slot):
                if existing.config == slot.config:
                    return SlotPlan(tuple(slots), changed=False)
                slots[index] = slot
                return SlotPlan(tuple(slots), changed=False, rewrite=True)
            slots[index] = slot
            return SlotPlan(tuple(slots), changed=True)
    return SlotPlan((*slots, slot), changed=True)


def plan_undeploy(current: Sequence[PlannedSlot], model: str) -> SlotPlan:
    """Slots after removing the slot of ``model`` (unchanged when there is none)."""
    kept = tuple(s for s in current if s.name != model)
    return SlotPlan(kept, changed=len(kept) != len(current))


def plan_redelegate(
    current: Sequence[PlannedSlot], config: str, delegates: Mapping[str, DelegateConfig]
) -> SlotPlan:
    """Slots after config ``config`` changed: its slots get their newly resolved delegate.

    ``delegates`` maps a slot name to its new delegate; only slots still naming ``config``
    change, and the plan is unchanged (no generation bump) when every delegate stayed the same.
    """
    slots = []
    changed = False
    for slot in current:
        new = delegates.get(slot.name)
        # compared as sent: markers kept only in the controller (default_shapes) are no change
        if slot.config == config and new is not None and _sent(new) != _sent(slot.delegate):
            slot = replace(slot, delegate=new)
            changed = True
        slots.append(slot)
    return SlotPlan(tuple(slots), changed=changed)


def _sent(delegate: DelegateConfig | None) -> object:
    return None if delegate is None else delegate.model_dump(mode="json")


def artifact_url(public_url: str, sha256: str) -> str:
    """Where agents download the artifact ``sha256``."""
    return f"{public_url.rstrip('/')}/api/v1/artifacts/{sha256}"


def desired_document(
    device_id: str,
    generation: int,
    slots: Sequence[PlannedSlot],
    public_url: str,
    issued_at: datetime,
    references: Mapping[str, ArtifactRef] | None = None,
    signatures: DocumentSignatures | None = None,
    jobs: Sequence[Job] = (),
    calibrating: Collection[int] = (),
    agent: AgentReleaseOrder | None = None,
) -> DesiredState:
    """The full DesiredState a device receives for ``slots`` at ``generation``.

    ``references`` maps a model's sha256 to its reference-outputs artifact, which the agent
    validates a new engine against before it switches to it; ``signatures`` the signed
    manifests, rollback authorisations and key rotations the device verifies (None: unsigned);
    ``calibrating`` the ids of the versions whose reference inputs may calibrate INT8 on the
    device (:meth:`controller.fleet.catalog.Catalog.references_of`); ``agent`` the agent release
    the device is ordered to run (None: left out of the document).
    """
    sig = signatures or DocumentSignatures(manifests={}, rollbacks={})
    return DesiredState(
        device_id=device_id,
        generation=generation,
        issued_at=issued_at,
        slots=tuple(
            ModelSlot(
                name=s.name,
                version=s.version,
                artifact=ArtifactRef(
                    url=artifact_url(public_url, s.sha256),
                    sha256=s.sha256,
                    size=s.size,
                    signed=sig.manifests.get(s.model_version_id),
                ),
                delegate=s.delegate,
                serving=ServingSettings(
                    max_batch_size=s.delegate.max_batch_size,
                    max_queue_delay_ms=s.delegate.max_queue_delay_ms,
                ),
                reference=(references or {}).get(s.sha256),
                reference_calibrates=s.model_version_id in calibrating
                and s.sha256 in (references or {}),
                rollback=sig.rollbacks.get(s.name),
            )
            for s in slots
        ),
        fleet_keys=sig.fleet_keys,
        jobs=tuple(jobs),
        agent=agent,
    )
