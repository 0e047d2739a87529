"""What devices report about themselves (first contact, reported state, presence) and the reads
of their recent samples and events.

Samples and events are written in batches by :class:`~controller.db.telemetry_store.TelemetryStore`.
One transaction per method; part of :class:`~controller.db.repository.Repository`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from controller.db.schema import Device, EventRecord, TelemetrySample
from controller.db.session import SessionStore
from controller.errors import DatabaseError, NotFound
from controller.records import EventEntry, TelemetryRecord
from shared.messages import ReportedState, Status


class ReportStore(SessionStore):
    """Writes of what devices send (creating a device on first contact) and reads of it."""

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

    def telemetry(self, device_id: str, limit: int) -> list[TelemetryRecord]:
        """The newest ``limit`` samples of a device, newest first."""
        with self._tx() as session:
            _require_device(session, device_id)
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
        with self._tx() as session:
            _require_device(session, device_id)
            rows = session.execute(
                select(EventRecord)
                .where(EventRecord.device_id == device_id)
                .order_by(EventRecord.ts.desc(), EventRecord.id.desc())
                .limit(limit)
            ).scalars()
            return [EventEntry(r.event_id, r.ts, r.kind, r.slot, r.message) for r in rows]

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


def _require_device(session: Session, device_id: str) -> None:
    if session.get(Device, device_id) is None:
        raise NotFound(f"unknown device '{device_id}'")
