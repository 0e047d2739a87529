"""Telemetry at volume: batched idempotent writes, per-minute rollups, retention.

Writes take a whole batch in one transaction: missing devices are created and ``last_seen`` set
once per device, then the samples go in with ``COPY`` into a temporary table and one
``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` on PostgreSQL, or one ``executemany`` of
``INSERT ... ON CONFLICT DO NOTHING`` on SQLite. (device_id, sample_id) is the idempotency key, so
a sample the agent's spool replays is stored once. SQLAlchemy errors, and psycopg errors of the
``COPY`` (which runs on the driver's cursor, outside SQLAlchemy), become :class:`DatabaseError`
here: the batched writer (:mod:`controller.ingest.batch`) retries and drops by that type.
The read queries live in :mod:`controller.db.telemetry_reads`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

import psycopg
from sqlalchemy import (
    Connection,
    Table,
    bindparam,
    delete,
    func,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError

from controller.db.schema import Device, EventRecord
from controller.db.session import describe
from controller.db.telemetry_reads import TelemetryReads
from controller.db.telemetry_rows import (
    ROLLUP_ROWS,
    SAMPLE_COLUMNS,
    SAMPLES,
    R,
    S,
    available,
    aware,
    minute_of,
    sample_row,
    sample_values,
)
from controller.errors import DatabaseError
from shared.agent_releases import AgentUpdateStatus
from shared.messages import Event
from shared.telemetry import Telemetry

MINUTE = timedelta(minutes=1)

_DEVICES = cast(Table, Device.__table__)
_EVENTS = cast(Table, EventRecord.__table__)
_COLS = ", ".join(SAMPLE_COLUMNS)
# Built from the fixed column names above, never from input.
_PG_TEMP = (
    "CREATE TEMP TABLE jf_samples_in ON COMMIT DROP AS "  # noqa: S608
    "SELECT " + _COLS + " FROM telemetry_samples WITH NO DATA"
)
_PG_COPY = "COPY jf_samples_in (" + _COLS + ") FROM STDIN"
_PG_MERGE = (
    "INSERT INTO telemetry_samples (" + _COLS + ") SELECT " + _COLS + " FROM jf_samples_in "  # noqa: S608
    "ON CONFLICT (device_id, sample_id) DO NOTHING"
)


_ROLLUP_LOCK = 0x6A66_726F_6C6C
"""PostgreSQL advisory lock key that takes rollup refreshes one at a time: ingest worker
processes refresh the same (device, minute) rows, and two delete-then-insert at once collide on
the primary key. SQLite's single writer lock already serialises them."""


@dataclass(frozen=True)
class Retention:
    """How long raw samples and minute rollups are kept (``JETFLEET_RETENTION_*``, read by
    :func:`controller.settings.from_environment`)."""

    raw_s: float = 24 * 3600.0
    rollup_s: float = 30 * 24 * 3600.0


@dataclass(frozen=True)
class WriteResult:
    """What one batch changed."""

    samples_inserted: int = 0
    samples_duplicate: int = 0
    events_inserted: int = 0
    events_duplicate: int = 0
    dirty: frozenset[tuple[str, datetime]] = field(default_factory=frozenset)
    """(device, minute) whose rollup must be recomputed."""


class TelemetryStore(TelemetryReads):
    """Batched telemetry writes, rollups and retention (and the reads of dashboards), on SQLite
    or PostgreSQL."""

    # --- writes ------------------------------------------------------------------------------

    def write_batch(
        self, samples: Sequence[Telemetry], events: Sequence[Event], now: datetime
    ) -> WriteResult:
        """Store a batch once per idempotency key.

        Two transactions: a short one creates missing devices and moves ``last_seen``, then one
        stores the samples and events. Several writers (ingest worker processes) touch the same
        device rows; holding those row locks across the whole COPY would make them take turns.
        """
        device_ids = sorted({m.device_id for m in samples} | {e.device_id for e in events})
        if not device_ids:
            return WriteResult()
        try:
            with self._engine.begin() as conn:
                self._touch_devices(conn, device_ids, now)
            with self._engine.begin() as conn:
                inserted = self._insert_samples(conn, samples) if samples else 0
                ev_inserted = self._insert_events(conn, events) if events else 0
        except (SQLAlchemyError, psycopg.Error) as exc:
            raise DatabaseError(f"cannot store a telemetry batch: {describe(exc)}") from exc
        dirty = frozenset((m.device_id, minute_of(aware(m.ts))) for m in samples)
        return WriteResult(
            inserted, len(samples) - inserted, ev_inserted, len(events) - ev_inserted, dirty
        )

    def _insert_on_conflict(self, table: Any, keys: list[str]) -> Any:
        dialect = postgresql if self._pg else sqlite
        return dialect.insert(table).on_conflict_do_nothing(index_elements=keys)

    def _touch_devices(self, conn: Connection, device_ids: list[str], now: datetime) -> None:
        """Create missing devices and move ``last_seen``, locking the rows in id order first.

        A deployment (``change_each``) locks its devices in id order too; an UPDATE on its own
        locks rows in the order its scan meets them, and the two deadlocked.
        """
        table = _DEVICES
        conn.execute(self._insert_on_conflict(table, ["id"]), [{"id": d} for d in device_ids])
        if self._pg:
            conn.execute(
                select(table.c.id)
                .where(table.c.id.in_(device_ids))
                .order_by(table.c.id)
                .with_for_update(key_share=True)
            )
        conn.execute(update(table).where(table.c.id.in_(device_ids)).values(last_seen=now))

    def _insert_samples(self, conn: Connection, samples: Sequence[Telemetry]) -> int:
        if not self._pg:
            stmt = self._insert_on_conflict(SAMPLES, ["device_id", "sample_id"])
            return int(conn.execute(stmt, [sample_row(m) for m in samples]).rowcount)
        raw = conn.connection.driver_connection
        assert raw is not None
        # psycopg's own cursor: its errors are psycopg.Error, not SQLAlchemyError (see write_batch).
        with raw.cursor() as cur:
            cur.execute(_PG_TEMP)
            with cur.copy(_PG_COPY) as copy:
                for msg in samples:
                    copy.write_row(sample_values(msg, json_text=True))
            cur.execute(_PG_MERGE)
            return int(cur.rowcount)

    def _insert_events(self, conn: Connection, events: Sequence[Event]) -> int:
        stmt = self._insert_on_conflict(_EVENTS, ["device_id", "event_id"])
        rows = [
            {
                "device_id": e.device_id,
                "event_id": e.event_id,
                "ts": aware(e.ts),
                "kind": e.kind,
                "slot": e.slot,
                "message": e.message,
                "data": dict(e.data),
            }
            for e in events
        ]
        inserted = len(conn.execute(stmt.returning(_EVENTS.c.id), rows).all())
        updates = agent_updates(events)
        if updates:  # an agent_update event is the device's latest update until its next report
            conn.execute(
                update(_DEVICES)
                .where(_DEVICES.c.id == bindparam("b_id"))
                .values(agent_update=bindparam("b_update", type_=_DEVICES.c.agent_update.type)),
                [{"b_id": d, "b_update": u} for d, u in sorted(updates.items())],
            )
        return inserted

    # --- rollups and retention ---------------------------------------------------------------

    def refresh_rollups(self, dirty: Iterable[tuple[str, datetime]]) -> int:
        """Recompute the minute rollups of these (device, minute) pairs from the raw samples."""
        by_minute: dict[datetime, set[str]] = defaultdict(set)
        for device_id, minute in dirty:
            by_minute[minute].add(device_id)
        if not by_minute:
            return 0
        table = ROLLUP_ROWS
        names = [c.name for c in table.columns]
        try:
            with self._engine.begin() as conn:
                if self._pg:
                    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ROLLUP_LOCK})
                for minute, devices in sorted(by_minute.items()):
                    ids = sorted(devices)
                    conn.execute(
                        delete(table).where(table.c.bucket == minute, table.c.device_id.in_(ids))
                    )
                    query = (
                        select(
                            S.device_id,
                            literal(minute, type_=table.c.bucket.type),
                            func.count(),
                            func.sum(S.interval_s),
                            func.avg(S.cpu_percent),
                            func.max(S.cpu_percent),
                            func.avg(S.gpu_load_percent),
                            func.max(S.temperature_max_c),
                            func.avg(S.power_mw),
                            func.avg(S.memory_used_bytes),
                            func.min(available()),
                            func.max(S.memory_total_bytes),
                            func.sum(S.requests),
                            func.sum(S.errors),
                            func.avg(S.latency_p50_ms),
                            func.max(S.latency_p99_ms),
                            func.max(S.queue_depth),
                        )
                        .where(S.ts >= minute, S.ts < minute + MINUTE, S.device_id.in_(ids))
                        .group_by(S.device_id)
                    )
                    conn.execute(table.insert().from_select(names, query))
        except SQLAlchemyError as exc:
            raise DatabaseError(f"cannot refresh telemetry rollups: {describe(exc)}") from exc
        return sum(len(d) for d in by_minute.values())

    def prune(self, now: datetime, retention: Retention) -> tuple[int, int]:
        """Delete raw samples and rollups past their retention, and events older than the
        rollups' (events used to be kept for ever: a gateway could fill the database
        with them); (samples, rollups) deleted."""
        raw_cut = now - timedelta(seconds=retention.raw_s)
        rollup_cut = now - timedelta(seconds=retention.rollup_s)
        try:
            with self._engine.begin() as conn:
                samples = conn.execute(delete(SAMPLES).where(S.ts < raw_cut))
                rollups = conn.execute(delete(ROLLUP_ROWS).where(R.bucket < rollup_cut))
                conn.execute(delete(_EVENTS).where(_EVENTS.c.ts < rollup_cut))
                return int(samples.rowcount), int(rollups.rowcount)
        except SQLAlchemyError as exc:
            raise DatabaseError(f"cannot prune telemetry: {describe(exc)}") from exc


def agent_updates(events: Sequence[Event]) -> dict[str, dict[str, Any]]:
    """The newest readable ``agent_update`` event's status per device (as stored JSON)."""
    newest: dict[str, AgentUpdateStatus] = {}
    for event in events:
        if event.kind != "agent_update":
            continue
        try:
            status = AgentUpdateStatus.model_validate(event.data)
        except ValueError:
            continue
        known = newest.get(event.device_id)
        if known is None or status.at >= known.at:
            newest[event.device_id] = status
    return {d: s.model_dump(mode="json") for d, s in newest.items()}
