"""Devices in the database: their labels, their planned slots (deployments) and generations.

One transaction per method; SQLAlchemy errors become :mod:`controller.errors` (through
:class:`~controller.db.session.SessionStore`). Part of
:class:`~controller.db.repository.Repository`.
What a device reports about itself is stored as JSON and handed out typed (the wire models
:class:`~shared.facts.DeviceFacts` and :class:`~shared.messages.SlotStatus`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, load_only

from controller.db.schema import Artifact, Deployment, Device, ModelVersion, utcnow
from controller.db.session import SessionStore, in_chunks
from controller.errors import Conflict, DatabaseError, NotFound
from controller.records import DeviceRecord, PlannedSlot, SlotChange, SlotPlan
from shared.agent_releases import AgentUpdateStatus
from shared.delegate import DelegateConfig
from shared.facts import DeviceFacts
from shared.hardware_class import hardware_class
from shared.messages import SlotStatus


class DeviceStore(SessionStore):
    """The ``devices`` and ``deployments`` tables, read and changed by operators' requests."""

    def devices(self, ids: Sequence[str] | None = None) -> list[DeviceRecord]:
        """Every device (or those in ``ids``), sorted by id."""
        with self._tx() as session:
            query = select(Device).order_by(Device.id)
            if ids is not None:
                query = query.where(Device.id.in_(list(ids)))
            rows = list(session.execute(query).scalars())
            slots = _slots_by_device(session, [d.id for d in rows])
            return [_device(d, slots.get(d.id, ())) for d in rows]

    def observed(
        self, ids: Sequence[str], model: str
    ) -> dict[str, tuple[int | None, SlotStatus | None]]:
        """Per known device in ``ids``: the generation it observed and its reported slot of
        ``model`` (None: it reports none). What the rollout loop looks at every tick for every
        device in flight: two columns, not :meth:`devices`' whole records with their planned
        slots (at 5,000 devices in flight, that read was a quarter of the loop's time)."""
        result: dict[str, tuple[int | None, SlotStatus | None]] = {}
        with self._tx() as session:
            for chunk in in_chunks(ids):
                rows = session.execute(
                    select(Device.id, Device.observed_generation, Device.reported_slots).where(
                        Device.id.in_(chunk)
                    )
                )
                for device_id, generation, slots in rows:
                    mine = [
                        s for s in slots or () if isinstance(s, dict) and s.get("name") == model
                    ]
                    parsed = parse_slots(mine)
                    result[device_id] = (generation, parsed[0] if parsed else None)
        return result

    def desired(self, ids: Sequence[str]) -> list[tuple[str, int, tuple[PlannedSlot, ...]]]:
        """(device, desired generation, planned slots) of each known device in ``ids``, sorted
        by id: what its retained desired document says, without the rest of the device (a
        republish of 10,000 documents spent a third of its time reading whole records, their
        facts and reported slots decoded for nothing)."""
        result: list[tuple[str, int, tuple[PlannedSlot, ...]]] = []
        with self._tx() as session:
            for chunk in in_chunks(sorted(ids)):
                rows = session.execute(
                    select(Device.id, Device.desired_generation)
                    .where(Device.id.in_(chunk))
                    .order_by(Device.id)
                ).all()
                slots = _slots_by_device(session, [device_id for device_id, _ in rows])
                result += [(d, generation, slots.get(d, ())) for d, generation in rows]
        return result

    def planned(self, ids: Sequence[str], model: str) -> dict[str, PlannedSlot]:
        """Per device in ``ids`` that has one: its planned slot of ``model`` (what a rollout
        records as the slot to roll back to), without reading the rest of the device."""
        result: dict[str, PlannedSlot] = {}
        with self._tx() as session:
            for chunk in in_chunks(ids):
                for device_id, slots in _slots_by_device(session, chunk, model).items():
                    result[device_id] = slots[-1]
        return result

    def device(self, device_id: str) -> DeviceRecord:
        """One device, or :class:`NotFound`."""
        found = self.devices([device_id])
        if not found:
            raise NotFound(f"unknown device '{device_id}'")
        return found[0]

    def device_labels(self) -> dict[str, dict[str, str]]:
        """Labels of every device, for selector matching."""
        with self._tx() as session:
            return {
                d: dict(labels) for d, labels in session.execute(select(Device.id, Device.labels))
            }

    def accept_class(self, device_id: str) -> str:
        """Pin the device to the hardware class of the facts it reports now (an operator's
        word after a JetPack upgrade or a module swap); the class. NotFound for an unknown
        device, Conflict when its facts are missing or unreadable."""
        with self._tx() as session:
            device = session.get(Device, device_id)
            if device is None:
                raise NotFound(f"unknown device '{device_id}'")
            facts, unreadable = read_facts(device.facts)
            if facts is None:
                raise Conflict(
                    f"device '{device_id}' has {unreadable or 'reported no facts yet'}: there "
                    "is no class to accept"
                )
            device.pinned_class = hardware_class(facts)
            return device.pinned_class

    def set_labels(
        self, device_id: str, labels: Mapping[str, str], *, create: bool = False
    ) -> dict[str, str]:
        """Replace the device's labels (the operator's, or its enrolment token's); NotFound for
        an unknown device unless ``create``, which adds it as never seen."""
        for attempt in range(2):
            try:
                with self._tx() as session:
                    device = session.get(Device, device_id)
                    if device is None:
                        if not create:
                            raise NotFound(
                                f"unknown device '{device_id}': it is listed after its first "
                                "contact; to label it before, put the labels on its enrolment "
                                f"token (jetfleet devices enroll-token --device {device_id} "
                                "--labels k=v)"
                            )
                        device = Device(id=device_id, labels={}, reported_slots=[])
                        session.add(device)
                    device.labels = dict(labels)
                break
            except IntegrityError as exc:
                if attempt:
                    raise DatabaseError(f"cannot label device '{device_id}': {exc}") from exc
        return dict(labels)

    def change_slots(
        self, device_ids: Sequence[str], plan: Callable[[tuple[PlannedSlot, ...]], SlotPlan]
    ) -> list[SlotChange]:
        """Apply ``plan`` to each device's slots; bump the generation of those that changed."""
        return self.change_each(dict.fromkeys(device_ids, plan))

    def change_each(
        self, plans: Mapping[str, Callable[[tuple[PlannedSlot, ...]], SlotPlan]]
    ) -> list[SlotChange]:
        """Apply each device's own plan to its slots in one transaction; bump changed ones.

        The devices are locked, and their slots and deployments read, a chunk of ids at a
        time rather than one device at a time (a rollout wave of 5,000 devices took five
        queries per device); rows are locked in id order (``FOR NO KEY UPDATE``, which leaves
        foreign-key checks alone), as the telemetry writer locks them, so none of these
        deadlock.
        """
        ids = list(plans)
        changes: list[SlotChange] = []
        with self._tx() as session:
            devices: dict[str, Device] = {}
            for chunk in in_chunks(sorted(ids)):
                query = (
                    select(Device)
                    .options(load_only(Device.id, Device.desired_generation))
                    .where(Device.id.in_(chunk))
                    .order_by(Device.id)
                )
                devices.update(
                    (d.id, d)
                    for d in session.execute(query.with_for_update(key_share=True)).scalars()
                )
            missing = next((d for d in ids if d not in devices), None)
            if missing is not None:
                raise NotFound(f"unknown device '{missing}'")
            current: dict[str, tuple[PlannedSlot, ...]] = {}
            for chunk in in_chunks(ids):
                current.update(_slots_by_device(session, chunk))
            outcomes = {d: plan(current.get(d, ())) for d, plan in plans.items()}
            rewrite = [d for d, o in outcomes.items() if o.changed or o.rewrite]
            existing = _deployments_of(session, rewrite)
            for device_id, outcome in outcomes.items():
                device = devices[device_id]
                if outcome.changed or outcome.rewrite:
                    _write_slots(session, device_id, outcome.slots, existing.get(device_id, {}))
                if outcome.changed:
                    device.desired_generation += 1
                changes.append(
                    SlotChange(device_id, device.desired_generation, outcome.changed, outcome.slots)
                )
        return changes


def parse_facts(stored: Mapping[str, Any] | None) -> DeviceFacts | None:
    """Stored facts JSON as the wire model; None when absent or no longer valid (stored by an
    older controller whose wire model differed)."""
    return read_facts(stored)[0]


def read_facts(stored: Mapping[str, Any] | None) -> tuple[DeviceFacts | None, str | None]:
    """Stored facts JSON as the wire model, or None and why it cannot be read (None, None when
    none are stored)."""
    if not stored:
        return None, None
    try:
        return DeviceFacts.model_validate(stored), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "facts"
        return None, (
            f"facts unreadable ({where}: {first['msg']}): stored by a controller of another "
            "version; the device's next report replaces them"
        )


def parse_slots(stored: Sequence[Mapping[str, Any]] | None) -> tuple[SlotStatus, ...]:
    """Stored reported slots JSON as wire models, leaving out any that no longer validate."""
    slots = []
    for raw in stored or ():
        try:
            slots.append(SlotStatus.model_validate(raw))
        except ValidationError:
            continue
    return tuple(slots)


def _device(d: Device, slots: tuple[PlannedSlot, ...]) -> DeviceRecord:
    facts, unreadable = read_facts(d.facts)
    return DeviceRecord(
        id=d.id,
        labels={str(k): str(v) for k, v in (d.labels or {}).items()},
        online=d.online,
        last_seen=d.last_seen,
        desired_generation=d.desired_generation,
        observed_generation=d.observed_generation,
        serve_url=d.serve_url,
        slots=slots,
        reported=parse_slots(d.reported_slots),
        device_facts=facts,
        facts_unreadable=unreadable,
        pinned_class=d.pinned_class,
        agent_version=d.agent_version,
        agent_update=read_agent_update(d.agent_update),
    )


def read_agent_update(stored: Mapping[str, Any] | None) -> AgentUpdateStatus | None:
    """A stored agent update as the wire model (None when none, or when it no longer validates)."""
    if not stored:
        return None
    try:
        return AgentUpdateStatus.model_validate(stored)
    except ValidationError:
        return None


def _slots_by_device(
    session: Session, device_ids: Sequence[str], model: str | None = None
) -> dict[str, tuple[PlannedSlot, ...]]:
    if not device_ids:
        return {}
    # Columns, not entities: a ModelVersion row carries its analysis report, signed manifest
    # and warm-up inputs as JSON, which the driver decoded again for every device's row (a
    # rollout chunk of 500 devices spent most of this read in json.loads at the scale bench).
    query = (
        select(
            Deployment.device_id,
            Deployment.delegate,
            Deployment.config,
            ModelVersion.id,
            ModelVersion.model,
            ModelVersion.version,
            ModelVersion.sha256,
            Artifact.size,
        )
        .join(ModelVersion, ModelVersion.id == Deployment.model_version_id)
        .join(Artifact, Artifact.sha256 == ModelVersion.sha256)
        .where(Deployment.device_id.in_(list(device_ids)))
        .order_by(Deployment.id)
    )
    if model is not None:
        query = query.where(Deployment.model == model)
    result: dict[str, list[PlannedSlot]] = {}
    for device_id, delegate, config, mv_id, name, version, sha256, size in session.execute(query):
        result.setdefault(device_id, []).append(
            PlannedSlot(
                name=name,
                version=version,
                sha256=sha256,
                size=size,
                delegate=DelegateConfig.model_validate(delegate),
                model_version_id=mv_id,
                config=config,
            )
        )
    return {k: tuple(v) for k, v in result.items()}


def _deployments_of(
    session: Session, device_ids: Sequence[str]
) -> dict[str, dict[str, Deployment]]:
    """Device → model → its deployment row, for these devices."""
    found: dict[str, dict[str, Deployment]] = {}
    for chunk in in_chunks(device_ids):
        rows = session.execute(select(Deployment).where(Deployment.device_id.in_(chunk)))
        for d in rows.scalars():
            found.setdefault(d.device_id, {})[d.model] = d
    return found


def _write_slots(
    session: Session,
    device_id: str,
    slots: tuple[PlannedSlot, ...],
    existing: dict[str, Deployment],
) -> None:
    wanted = {s.name for s in slots}
    for name, dep in existing.items():
        if name not in wanted:
            session.delete(dep)
    now = utcnow()
    for slot in slots:
        delegate = slot.delegate.model_dump(mode="json")
        current = existing.get(slot.name)
        if current is None:
            session.add(
                Deployment(
                    device_id=device_id,
                    model=slot.name,
                    model_version_id=slot.model_version_id,
                    delegate=delegate,
                    config=slot.config,
                    updated_at=now,
                )
            )
        elif (current.model_version_id, current.delegate, current.config) != (
            slot.model_version_id,
            delegate,
            slot.config,
        ):
            current.model_version_id = slot.model_version_id
            current.delegate = delegate
            current.config = slot.config
            current.updated_at = now
