"""What devices report about themselves (first contact, reported state, presence) and the reads
of their recent samples and events.

Samples and events are written in batches by :class:`~controller.db.telemetry_store.TelemetryStore`.
One transaction per method; part of :class:`~controller.db.repository.Repository`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Boolean,
    Integer,
    String,
    Table,
    and_,
    bindparam,
    case,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import BindParameter, Case, Update

from controller.db.schema import Device, EventRecord, TelemetrySample
from controller.db.session import SessionStore, in_chunks
from controller.errors import DatabaseError, NotFound
from controller.records import EventEntry, TelemetryRecord
from shared.hardware_class import hardware_class
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
        reported_class = hardware_class(msg.facts)
        values = {
            "last_seen": now,
            "facts": msg.facts.model_dump(mode="json", by_alias=True),
            "reported_slots": [s.model_dump(mode="json") for s in msg.slots],
            "observed_generation": msg.observed_generation,
            "serve_url": msg.serve_url,
            "agent_version": msg.agent_version,
            "agent_update": _update_json(msg),
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
                .values(pinned_class=func.coalesce(Device.pinned_class, reported_class))
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
            device.pinned_class = device.pinned_class or reported_class

        self._with_device(msg.device_id, now, first)

    def record_many(self, messages: Sequence[ReportedState | Status], now: datetime) -> None:
        """Store reported states and presence in one transaction, in the given order per device.

        What :meth:`record_reported` and :meth:`record_status` do for one message each, for a
        lane's backlog at once: at 10,000 gateways answering a wave, one transaction per
        report (a pool ping, the UPDATE and the COMMIT: three round trips) on every replica was
        half of each replica's CPU (py-spy, ``bench/scale.py``). Then one UPDATE per message,
        each waiting for its answer, was most of a new rollout leader's time storing the 10,000
        retained reports the broker hands it at takeover (~8 s, py-spy): now one statement,
        executed for every message at once (:data:`_RECORD`; psycopg sends them in one
        pipeline). The rows are updated in device order (a stable sort: one device's messages
        stay in order), reports and presence alike, so two replicas storing overlapping
        backlogs take the row locks in the same order and cannot deadlock each other. Devices
        not yet known (one SELECT first) are created afterwards, one transaction each (first
        contact). Any database error fails the whole batch (nothing of it is stored): the
        caller stores its messages one by one then.
        """
        if not messages:
            return
        unknown: list[ReportedState | Status] = []
        rows: list[dict[str, object]] = []
        with self._tx() as session:
            conn = session.connection()
            known: set[str] = set()
            for chunk in in_chunks(sorted({m.device_id for m in messages})):
                known.update(conn.execute(select(Device.id).where(Device.id.in_(chunk))).scalars())
            for msg in sorted(messages, key=lambda m: m.device_id):
                if msg.device_id not in known:
                    unknown.append(msg)
                elif isinstance(msg, ReportedState):
                    rows.append(
                        {
                            "b_id": msg.device_id,
                            "b_seen": now,
                            "b_report": True,
                            "b_online": None,
                            "b_generation": msg.observed_generation,
                            "b_facts": msg.facts.model_dump(mode="json", by_alias=True),
                            "b_slots": [s.model_dump(mode="json") for s in msg.slots],
                            "b_url": msg.serve_url,
                            "b_class": hardware_class(msg.facts),
                            "b_agent": msg.agent_version,
                            "b_update": _update_json(msg),
                        }
                    )
                else:
                    rows.append(
                        {
                            "b_id": msg.device_id,
                            "b_seen": now,
                            "b_report": False,
                            "b_online": msg.state == "online",
                            "b_generation": None,
                            "b_facts": None,
                            "b_slots": None,
                            "b_url": None,
                            "b_class": None,
                            "b_agent": None,
                            "b_update": None,
                        }
                    )
            if rows:
                conn.execute(_RECORD, rows)
        for msg in unknown:
            if isinstance(msg, ReportedState):
                self.record_reported(msg, now)
            else:
                self.record_status(msg, now)

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


def _record_statement() -> Update:
    """The UPDATE of :meth:`ReportStore.record_many`, one row per message (``b_report``: a
    reported state, else presence). A report of an older generation than the stored one, and
    presence, leave the reported columns as they are; every message is contact (``last_seen``);
    presence alone sets ``online``; a report stores the agent's version and latest update, and
    pins the device's hardware class when none is pinned yet (``pinned_class``: the class it
    may upload engines for)."""
    table = cast(Table, Device.__table__)
    c = table.c
    report = bindparam("b_report", type_=Boolean)
    newer = and_(
        report,
        or_(c.observed_generation.is_(None), c.observed_generation <= bindparam("b_generation")),
    )

    def reported(column: str, value: BindParameter[Any]) -> Case[Any]:
        return case((newer, value), else_=c[column])

    return (
        update(table)
        .where(c.id == bindparam("b_id"))
        .values(
            last_seen=bindparam("b_seen"),
            online=case((report, c.online), else_=bindparam("b_online", type_=Boolean)),
            facts=reported("facts", bindparam("b_facts", type_=c.facts.type)),
            reported_slots=reported(
                "reported_slots", bindparam("b_slots", type_=c.reported_slots.type)
            ),
            serve_url=reported("serve_url", bindparam("b_url", type_=c.serve_url.type)),
            observed_generation=reported(
                "observed_generation", bindparam("b_generation", type_=Integer)
            ),
            pinned_class=func.coalesce(c.pinned_class, bindparam("b_class", type_=String)),
            agent_version=reported("agent_version", bindparam("b_agent", type_=String)),
            agent_update=reported("agent_update", bindparam("b_update", type_=c.agent_update.type)),
        )
    )


def _update_json(msg: ReportedState) -> dict[str, Any] | None:
    """The report's agent update as stored (None: it reports none)."""
    update = msg.agent_update
    return None if update is None else update.model_dump(mode="json")


_RECORD = _record_statement()
