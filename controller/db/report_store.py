"""What devices report about themselves (first contact, reported state, presence) and the reads
of their recent samples and events.

Samples and events are written in batches by :class:`~controller.db.telemetry_store.TelemetryStore`.
One transaction per method; part of :class:`~controller.db.repository.Repository`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import or_, select, update
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
        (selectors trust labels: only the operator and enrolment tokens set them).

        A report of an older generation than the stored one only counts as contact: every
        controller replica stores every report in the order it received them, so one that
        lags writes a device's older reports after another replica wrote newer ones (an agent
        never goes back a generation). One UPDATE, no read: at thousands of reports a second
        across replicas the ORM's read-modify-write was most of the ingest time.
        """
        values = {
            "last_seen": now,
            "facts": msg.facts.model_dump(mode="json", by_alias=True),
            "reported_slots": [s.model_dump(mode="json") for s in msg.slots],
            "observed_generation": msg.observed_generation,
            "serve_url": msg.serve_url,
        }
        with self._tx() as session:
            stored = session.execute(
                update(Device)
                .where(Device.id == msg.device_id)
                .where(
                    or_(
                        Device.observed_generation.is_(None),
                        Device.observed_generation <= msg.observed_generation,
                    )
                )
                .values(values)
                .execution_options(synchronize_session=False)
            )
            if getattr(stored, "rowcount", 0):
                return
            seen = session.execute(
                update(Device)
                .where(Device.id == msg.device_id)
                .values(last_seen=now)
                .execution_options(synchronize_session=False)
            )
            if getattr(seen, "rowcount", 0):
                return

        def first(device: Device) -> None:
            for name, value in values.items():
                setattr(device, name, value)

        self._with_device(msg.device_id, now, first)

    def record_status(self, msg: Status, now: datetime) -> None:
        """Store presence (online / offline): one UPDATE, the device created when unknown."""
        online = msg.state == "online"
        with self._tx() as session:
            stored = session.execute(
                update(Device)
                .where(Device.id == msg.device_id)
                .values(online=online, last_seen=now)
                .execution_options(synchronize_session=False)
            )
            if getattr(stored, "rowcount", 0):
                return

        def mark(device: Device) -> None:
            device.online = online

        self._with_device(msg.device_id, now, mark)

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
