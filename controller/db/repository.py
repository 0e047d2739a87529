"""Every read and write of the controller's database, as methods that speak in records.

Each method is one transaction. SQLAlchemy errors are translated into :mod:`controller.errors`
here; callers never see an ORM object or a SQLAlchemy exception.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from controller.db.schema import (
    Artifact,
    Deployment,
    Device,
    EventRecord,
    Model,
    ModelVersion,
    TelemetrySample,
    utcnow,
)
from controller.db.session import SessionStore
from controller.errors import Conflict, DatabaseError, NotFound
from controller.fleet.desired import PlannedSlot, SlotPlan
from controller.records import (
    AnalysisState,
    DeviceRecord,
    EventEntry,
    SlotChange,
    TelemetryRecord,
    VersionRecord,
)
from shared.delegate import DelegateConfig
from shared.messages import Event, ReportedState, Status, Telemetry


class Repository(SessionStore):
    """The controller's database, one transaction per method."""

    def ping(self) -> None:
        """Raise :class:`DatabaseError` unless the database answers."""
        with self._tx() as session:
            session.execute(text("SELECT 1"))

    # --- catalog ---------------------------------------------------------------------------

    def find_version(self, model: str, version: str) -> VersionRecord | None:
        """The version ``model:version``, if stored."""
        with self._tx() as session:
            row = session.execute(
                select(ModelVersion, Artifact)
                .join(Artifact, Artifact.sha256 == ModelVersion.sha256)
                .where(ModelVersion.model == model, ModelVersion.version == version)
            ).first()
            return None if row is None else _version(row[0], row[1])

    def add_version(
        self,
        model: str,
        version: str,
        sha256: str,
        size: int,
        inputs: list[dict[str, Any]],
        outputs: list[dict[str, Any]],
        has_qdq: bool = False,
        analysis: dict[str, Any] | None = None,
        analysis_state: AnalysisState = "done",
    ) -> VersionRecord:
        """Store a new version (and its model and artifact rows when new); ``analysis_state``
        pending stores it before its analysis (:meth:`set_analysis` stores that later)."""
        try:
            with self._tx() as session:
                if session.get(Model, model) is None:
                    session.add(Model(name=model))
                artifact = session.get(Artifact, sha256)
                if artifact is None:
                    artifact = Artifact(sha256=sha256, size=size)
                    session.add(artifact)
                row = ModelVersion(
                    model=model,
                    version=version,
                    sha256=sha256,
                    inputs=inputs,
                    outputs=outputs,
                    has_qdq=has_qdq,
                    analysis=_encode_analysis(analysis_state, analysis or {}, None),
                )
                session.add(row)
                session.flush()
                return _version(row, artifact)
        except IntegrityError as exc:
            raise Conflict(
                f"model version {model}:{version} was stored concurrently; retry the upload"
            ) from exc

    def set_analysis(
        self,
        version_id: int,
        state: AnalysisState,
        reports: dict[str, Any] | None = None,
        error: str | None = None,
        out_of_time_s: float | None = None,
    ) -> None:
        """Store the outcome of a version's analysis: its reports (done) or why it failed;
        ``out_of_time_s``: it failed by running past that bound (see :meth:`analyses_to_run`)."""
        with self._tx() as session:
            row = session.get(ModelVersion, version_id)
            if row is None:
                raise NotFound(f"no model version with id {version_id}")
            row.analysis = _encode_analysis(state, reports or {}, error, out_of_time_s)

    def analyses_to_run(self, timeout_s: float) -> list[VersionRecord]:
        """The versions whose analysis is pending, or failed by running past a bound shorter
        than ``timeout_s`` (it may finish now), oldest first."""
        analysis = ModelVersion.analysis
        with self._tx() as session:
            rows = session.execute(
                select(ModelVersion, Artifact)
                .join(Artifact, Artifact.sha256 == ModelVersion.sha256)
                .where(
                    or_(
                        analysis[_STATE].as_string() == "pending",
                        and_(
                            analysis[_STATE].as_string() == "failed",
                            analysis[_OUT_OF_TIME].as_float() < timeout_s,
                        ),
                    )
                )
                .order_by(ModelVersion.id)
            ).all()
            return [_version(mv, art) for mv, art in rows]

    def versions_by_id(self, ids: Sequence[int]) -> dict[int, VersionRecord]:
        """The stored versions with these ids."""
        if not ids:
            return {}
        with self._tx() as session:
            rows = session.execute(
                select(ModelVersion, Artifact)
                .join(Artifact, Artifact.sha256 == ModelVersion.sha256)
                .where(ModelVersion.id.in_(list(ids)))
            ).all()
            return {mv.id: _version(mv, art) for mv, art in rows}

    def models(self, name: str | None = None) -> dict[str, list[VersionRecord]]:
        """Every model (or just ``name``) with its versions, oldest first."""
        with self._tx() as session:
            names_query = select(Model.name).order_by(Model.name)
            if name is not None:
                names_query = names_query.where(Model.name == name)
            result: dict[str, list[VersionRecord]] = {
                n: [] for n in session.execute(names_query).scalars()
            }
            query = (
                select(ModelVersion, Artifact)
                .join(Artifact, Artifact.sha256 == ModelVersion.sha256)
                .order_by(ModelVersion.created_at, ModelVersion.id)
            )
            if name is not None:
                query = query.where(ModelVersion.model == name)
            for mv, art in session.execute(query).all():
                result.setdefault(mv.model, []).append(_version(mv, art))
            return result

    # --- devices ---------------------------------------------------------------------------

    def devices(self, ids: Sequence[str] | None = None) -> list[DeviceRecord]:
        """Every device (or those in ``ids``), sorted by id."""
        with self._tx() as session:
            query = select(Device).order_by(Device.id)
            if ids is not None:
                query = query.where(Device.id.in_(list(ids)))
            rows = list(session.execute(query).scalars())
            slots = _slots_by_device(session, [d.id for d in rows])
            return [_device(d, slots.get(d.id, ())) for d in rows]

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
        """Apply each device's own plan to its slots in one transaction; bump changed ones."""
        changes: list[SlotChange] = []
        with self._tx() as session:
            for device_id, plan in plans.items():
                device = session.get(Device, device_id, with_for_update=True)
                if device is None:
                    raise NotFound(f"unknown device '{device_id}'")
                current = _slots_by_device(session, [device_id]).get(device_id, ())
                outcome = plan(current)
                if outcome.changed or outcome.rewrite:
                    _write_slots(session, device_id, outcome.slots)
                if outcome.changed:
                    device.desired_generation += 1
                changes.append(
                    SlotChange(device_id, device.desired_generation, outcome.changed, outcome.slots)
                )
        return changes

    # --- ingest ----------------------------------------------------------------------------

    def record_contact(self, device_id: str, now: datetime) -> None:
        """Create the device on first contact; note that it was seen."""
        self._with_device(device_id, now, lambda _device: None)

    def record_reported(self, msg: ReportedState, now: datetime) -> None:
        """Store what the agent reports about itself and its slots; never its ``labels``
        (selectors trust labels: only the operator and enrolment tokens set them)."""

        def update(device: Device) -> None:
            device.facts = msg.facts.model_dump(mode="json", by_alias=True)
            device.reported_slots = [s.model_dump(mode="json") for s in msg.slots]
            device.observed_generation = msg.observed_generation
            device.serve_url = msg.serve_url

        self._with_device(msg.device_id, now, update)

    def record_status(self, msg: Status, now: datetime) -> None:
        """Store presence (online / offline)."""

        def update(device: Device) -> None:
            device.online = msg.state == "online"

        self._with_device(msg.device_id, now, update)

    def add_telemetry(self, msg: Telemetry, now: datetime) -> bool:
        """Store a sample once; False when (device, sample_id) was already stored."""

        def add(session: Session) -> None:
            session.add(
                TelemetrySample(
                    device_id=msg.device_id,
                    sample_id=msg.sample_id,
                    ts=msg.ts,
                    interval_s=msg.interval_s,
                    cpu_percent=msg.cpu_percent,
                    memory_used_bytes=msg.memory_used_bytes,
                    memory_total_bytes=msg.memory_total_bytes,
                    models=[m.model_dump(mode="json") for m in msg.models],
                )
            )

        exists = select(TelemetrySample.id).where(
            TelemetrySample.device_id == msg.device_id, TelemetrySample.sample_id == msg.sample_id
        )
        return self._insert_once(msg.device_id, now, exists, add)

    def add_event(self, msg: Event, now: datetime) -> bool:
        """Store an event once; False when (device, event_id) was already stored."""

        def add(session: Session) -> None:
            session.add(
                EventRecord(
                    device_id=msg.device_id,
                    event_id=msg.event_id,
                    ts=msg.ts,
                    kind=msg.kind,
                    slot=msg.slot,
                    message=msg.message,
                    data=dict(msg.data),
                )
            )

        exists = select(EventRecord.id).where(
            EventRecord.device_id == msg.device_id, EventRecord.event_id == msg.event_id
        )
        return self._insert_once(msg.device_id, now, exists, add)

    def telemetry(self, device_id: str, limit: int) -> list[TelemetryRecord]:
        """The newest ``limit`` samples of a device, newest first."""
        self.device(device_id)
        with self._tx() as session:
            rows = session.execute(
                select(TelemetrySample)
                .where(TelemetrySample.device_id == device_id)
                .order_by(TelemetrySample.ts.desc(), TelemetrySample.id.desc())
                .limit(limit)
            ).scalars()
            return [
                TelemetryRecord(
                    r.sample_id,
                    r.ts,
                    r.cpu_percent,
                    r.memory_used_bytes,
                    r.memory_total_bytes,
                    list(r.models),
                )
                for r in rows
            ]

    def events(self, device_id: str, limit: int) -> list[EventEntry]:
        """The newest ``limit`` events of a device, newest first."""
        self.device(device_id)
        with self._tx() as session:
            rows = session.execute(
                select(EventRecord)
                .where(EventRecord.device_id == device_id)
                .order_by(EventRecord.ts.desc(), EventRecord.id.desc())
                .limit(limit)
            ).scalars()
            return [EventEntry(r.event_id, r.ts, r.kind, r.slot, r.message) for r in rows]

    # --- helpers ---------------------------------------------------------------------------

    def _with_device(self, device_id: str, now: datetime, update: Callable[[Device], None]) -> None:
        for attempt in range(2):
            try:
                with self._tx() as session:
                    device = session.get(Device, device_id)
                    if device is None:
                        device = Device(id=device_id, labels={}, reported_slots=[])
                        session.add(device)
                    device.last_seen = now
                    update(device)
                return
            except IntegrityError as exc:
                if attempt:
                    raise DatabaseError(f"cannot record device '{device_id}': {exc}") from exc

    def _insert_once(
        self, device_id: str, now: datetime, exists: Any, add: Callable[[Session], None]
    ) -> bool:
        self.record_contact(device_id, now)
        try:
            with self._tx() as session:
                if session.execute(exists).first() is not None:
                    return False
                add(session)
            return True
        except IntegrityError:
            return False


_STATE, _ERROR, _OUT_OF_TIME = "state", "error", "out_of_time_s"
"""Keys of the ``analysis`` column besides the TensorRT versions: present only while the
analysis is pending or after it failed (a done analysis is its reports alone, as it always was,
so versions stored before the analysis ran in the background need no migration)."""


def _encode_analysis(
    state: AnalysisState,
    reports: dict[str, Any],
    error: str | None,
    out_of_time_s: float | None = None,
) -> dict[str, Any]:
    if state == "done":
        return dict(reports)
    encoded: dict[str, Any] = {_STATE: state}
    if error is not None:
        encoded[_ERROR] = error
    if out_of_time_s is not None:
        encoded[_OUT_OF_TIME] = out_of_time_s
    return encoded


def _decode_analysis(
    stored: dict[str, Any] | None,
) -> tuple[AnalysisState, dict[str, Any], str | None]:
    raw = dict(stored or {})
    state = raw.pop(_STATE, "done")
    error = raw.pop(_ERROR, None)
    raw.pop(_OUT_OF_TIME, None)
    if state not in ("pending", "failed"):
        return "done", raw, None
    return state, {}, None if error is None else str(error)


def _version(mv: ModelVersion, art: Artifact) -> VersionRecord:
    state, reports, error = _decode_analysis(mv.analysis)
    return VersionRecord(
        id=mv.id,
        model=mv.model,
        version=mv.version,
        sha256=mv.sha256,
        size=art.size,
        inputs=list(mv.inputs),
        outputs=list(mv.outputs),
        created_at=mv.created_at,
        has_qdq=bool(mv.has_qdq),
        analysis=reports,
        analysis_state=state,
        analysis_error=error,
    )


def _device(d: Device, slots: tuple[PlannedSlot, ...]) -> DeviceRecord:
    return DeviceRecord(
        id=d.id,
        labels={str(k): str(v) for k, v in (d.labels or {}).items()},
        online=d.online,
        last_seen=d.last_seen,
        desired_generation=d.desired_generation,
        observed_generation=d.observed_generation,
        facts=d.facts,
        reported_slots=list(d.reported_slots or []),
        serve_url=d.serve_url,
        slots=slots,
    )


def _slots_by_device(
    session: Session, device_ids: Sequence[str]
) -> dict[str, tuple[PlannedSlot, ...]]:
    if not device_ids:
        return {}
    rows = session.execute(
        select(Deployment, ModelVersion, Artifact)
        .join(ModelVersion, ModelVersion.id == Deployment.model_version_id)
        .join(Artifact, Artifact.sha256 == ModelVersion.sha256)
        .where(Deployment.device_id.in_(list(device_ids)))
        .order_by(Deployment.id)
    ).all()
    result: dict[str, list[PlannedSlot]] = {}
    for dep, mv, art in rows:
        result.setdefault(dep.device_id, []).append(
            PlannedSlot(
                name=mv.model,
                version=mv.version,
                sha256=mv.sha256,
                size=art.size,
                delegate=DelegateConfig.model_validate(dep.delegate),
                model_version_id=mv.id,
                config=dep.config,
            )
        )
    return {k: tuple(v) for k, v in result.items()}


def _write_slots(session: Session, device_id: str, slots: tuple[PlannedSlot, ...]) -> None:
    existing = {
        d.model: d
        for d in session.execute(select(Deployment).where(Deployment.device_id == device_id))
        .scalars()
        .all()
    }
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
