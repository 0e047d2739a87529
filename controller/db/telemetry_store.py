"""Telemetry at volume: batched idempotent writes, per-minute rollups, retention, read queries.

Writes take a whole batch in one transaction: missing devices are created and ``last_seen`` set
once per device, then the samples go in with ``COPY`` into a temporary table and one
``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` on PostgreSQL, or one ``executemany`` of
``INSERT ... ON CONFLICT DO NOTHING`` on SQLite. (device_id, sample_id) is the idempotency key, so
a sample the agent's spool replays is stored once. SQLAlchemy and psycopg errors become
:class:`DatabaseError` here.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, cast

from pydantic import TypeAdapter
from sqlalchemy import (
    Connection,
    Engine,
    Table,
    delete,
    func,
    inspect,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql.elements import ColumnElement

from controller.db.schema import Device, EventRecord, TelemetrySample
from controller.db.schema_health import TelemetryRollup
from controller.db.session import describe
from controller.errors import DatabaseError, InvalidInput
from controller.fleet.health import Vitals
from shared.messages import Event, ModelStats, Telemetry

MINUTE = timedelta(minutes=1)
MAX_POINTS = 5000

_SAMPLES = cast(Table, TelemetrySample.__table__)
_ROLLUPS = cast(Table, TelemetryRollup.__table__)
_DEVICES = cast(Table, Device.__table__)
_EVENTS = cast(Table, EventRecord.__table__)
_S = _SAMPLES.c
_R = _ROLLUPS.c
_SAMPLE_COLUMNS = (
    "device_id",
    "sample_id",
    "ts",
    "interval_s",
    "cpu_percent",
    "memory_used_bytes",
    "memory_total_bytes",
    "models",
    "requests",
    "errors",
    "latency_p50_ms",
    "latency_p99_ms",
    "gpu_load_percent",
    "temperature_max_c",
    "power_mw",
    "memory_available_bytes",
    "largest_free_block_bytes",
    "nvmap_used_bytes",
    "disk_free_bytes",
    "queue_depth",
    "swaps",
    "spool_dropped",
    "extra",
)
_EXTRA_FIELDS = (
    "temperatures_c",
    "power_rails_mw",
    "power_mode",
    "jetson_clocks",
    "gpu_memory_used_bytes",
    "gpu_memory_total_bytes",
    "net_sent_bytes",
    "net_recv_bytes",
    "lfb_blocks",
    "lfb_block_bytes",
    "latency_bounds_ms",
    "sources_absent",
)
_JSON_COLUMNS = ("models", "extra")
_MODELS_JSON = TypeAdapter(tuple[ModelStats, ...])
"""One serializer call for a sample's models: ``model_dump`` per model cost more than the rest
of the row together (issue 6's ingest profile)."""
_COLS = ", ".join(_SAMPLE_COLUMNS)
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


def _available() -> ColumnElement[Any]:
    return func.coalesce(_S.memory_available_bytes, _S.memory_total_bytes - _S.memory_used_bytes)


# metric name → (raw sample expression, rollup column)
METRICS: dict[str, tuple[ColumnElement[Any], ColumnElement[Any]]] = {
    "cpu_percent": (_S.cpu_percent, _R.cpu_avg),
    "gpu_load_percent": (_S.gpu_load_percent, _R.gpu_load_avg),
    "temperature_c": (_S.temperature_max_c, _R.temperature_max_c),
    "power_mw": (_S.power_mw, _R.power_avg_mw),
    "memory_used_bytes": (_S.memory_used_bytes, _R.memory_used_avg_bytes),
    "memory_available_bytes": (_available(), _R.memory_available_min_bytes),
    "latency_p50_ms": (_S.latency_p50_ms, _R.latency_p50_avg_ms),
    "latency_p99_ms": (_S.latency_p99_ms, _R.latency_p99_max_ms),
    "queue_depth": (_S.queue_depth, _R.queue_depth_max),
    "requests": (_S.requests, _R.requests),
    "errors": (_S.errors, _R.errors),
    "throughput_rps": (_S.requests, _R.requests),
}
ROLLUPS = ("avg", "min", "max", "sum", "last")


@dataclass(frozen=True)
class Retention:
    """How long raw samples and minute rollups are kept (``JETFLEET_RETENTION_*`` override)."""

    raw_s: float = 24 * 3600.0
    rollup_s: float = 30 * 24 * 3600.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Retention:
        """``JETFLEET_RETENTION_RAW_HOURS`` and ``JETFLEET_RETENTION_ROLLUP_DAYS``."""
        raw = _positive(env, "JETFLEET_RETENTION_RAW_HOURS", cls.raw_s / 3600)
        rollup = _positive(env, "JETFLEET_RETENTION_ROLLUP_DAYS", cls.rollup_s / 86400)
        return cls(raw_s=raw * 3600, rollup_s=rollup * 86400)


def _positive(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise InvalidInput(f"{name}={raw!r} is not a number: set e.g. {name}={default:g}") from exc
    if value <= 0:
        raise InvalidInput(f"{name} must be > 0, got {raw}")
    return value


@dataclass(frozen=True)
class WriteResult:
    """What one batch changed."""

    samples_inserted: int = 0
    samples_duplicate: int = 0
    events_inserted: int = 0
    events_duplicate: int = 0
    dirty: frozenset[tuple[str, datetime]] = field(default_factory=frozenset)
    """(device, minute) whose rollup must be recomputed."""


def sample_values(msg: Telemetry, *, json_text: bool) -> tuple[Any, ...]:
    """The ``telemetry_samples`` row of one message, in ``_SAMPLE_COLUMNS`` order.

    The JSON columns (models, extra) are JSON text with ``json_text`` (for ``COPY``, serialized
    once, straight from the models), else Python values (for SQLAlchemy's JSON type).
    """
    models = msg.models
    p50 = [m.latency_p50_ms for m in models if m.latency_p50_ms is not None]
    p99 = [m.latency_p99_ms for m in models if m.latency_p99_ms is not None]
    extra = {
        name: value
        for name in _EXTRA_FIELDS
        if (value := getattr(msg, name)) is not None and value != {}
    }
    extra_value: Any = None
    if json_text:
        models_value: Any = _MODELS_JSON.dump_json(models).decode() if models else "[]"
        if extra:
            extra_value = json.dumps(extra, default=list, separators=(",", ":"))
    else:
        models_value = _MODELS_JSON.dump_python(models, mode="json") if models else []
        if extra:
            extra_value = json.loads(json.dumps(extra, default=list))
    return (
        msg.device_id,
        msg.sample_id,
        _aware(msg.ts),
        msg.interval_s,
        msg.cpu_percent,
        msg.memory_used_bytes,
        msg.memory_total_bytes,
        models_value,
        sum(m.requests for m in models),
        sum(m.errors for m in models),
        max(p50) if p50 else None,
        max(p99) if p99 else None,
        msg.gpu_load_percent,
        msg.temperature_max_c,
        msg.power_mw,
        msg.memory_available_bytes,
        msg.largest_free_block_bytes,
        msg.nvmap_used_bytes,
        msg.disk_free_bytes,
        msg.queue_depth,
        msg.swaps,
        msg.spool_dropped,
        extra_value,
    )


def sample_row(msg: Telemetry) -> dict[str, Any]:
    """The ``telemetry_samples`` row of one message as a mapping (JSON columns as Python values)."""
    return dict(zip(_SAMPLE_COLUMNS, sample_values(msg, json_text=False), strict=True))


def _aware(ts: datetime) -> datetime:
    """A timestamp without an offset is UTC (the wire contract's times are UTC)."""
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


def minute_of(ts: datetime) -> datetime:
    """Start of the UTC minute holding ``ts``."""
    return ts.astimezone(timezone.utc).replace(second=0, microsecond=0)


class TelemetryStore:
    """Batched telemetry writes and the read side of dashboards, on SQLite or PostgreSQL."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._pg = engine.dialect.name == "postgresql"

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
        except SQLAlchemyError as exc:
            raise DatabaseError(f"cannot store a telemetry batch: {describe(exc)}") from exc
        dirty = frozenset((m.device_id, minute_of(_aware(m.ts))) for m in samples)
        return WriteResult(
            inserted, len(samples) - inserted, ev_inserted, len(events) - ev_inserted, dirty
        )

    def _insert_on_conflict(self, table: Any, keys: list[str]) -> Any:
        dialect = postgresql if self._pg else sqlite
        return dialect.insert(table).on_conflict_do_nothing(index_elements=keys)

    def _touch_devices(self, conn: Connection, device_ids: list[str], now: datetime) -> None:
        table = _DEVICES
        conn.execute(self._insert_on_conflict(table, ["id"]), [{"id": d} for d in device_ids])
        conn.execute(update(table).where(table.c.id.in_(device_ids)).values(last_seen=now))

    def _insert_samples(self, conn: Connection, samples: Sequence[Telemetry]) -> int:
        if not self._pg:
            stmt = self._insert_on_conflict(_SAMPLES, ["device_id", "sample_id"])
            return int(conn.execute(stmt, [sample_row(m) for m in samples]).rowcount)
        raw = conn.connection.driver_connection
        assert raw is not None
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
                "ts": e.ts if e.ts.tzinfo else e.ts.replace(tzinfo=timezone.utc),
                "kind": e.kind,
                "slot": e.slot,
                "message": e.message,
                "data": dict(e.data),
            }
            for e in events
        ]
        return len(conn.execute(stmt.returning(_EVENTS.c.id), rows).all())

    # --- rollups and retention ---------------------------------------------------------------

    def refresh_rollups(self, dirty: Iterable[tuple[str, datetime]]) -> int:
        """Recompute the minute rollups of these (device, minute) pairs from the raw samples."""
        by_minute: dict[datetime, set[str]] = defaultdict(set)
        for device_id, minute in dirty:
            by_minute[minute].add(device_id)
        if not by_minute:
            return 0
        table = _ROLLUPS
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
                            _S.device_id,
                            literal(minute, type_=table.c.bucket.type),
                            func.count(),
                            func.sum(_S.interval_s),
                            func.avg(_S.cpu_percent),
                            func.max(_S.cpu_percent),
                            func.avg(_S.gpu_load_percent),
                            func.max(_S.temperature_max_c),
                            func.avg(_S.power_mw),
                            func.avg(_S.memory_used_bytes),
                            func.min(_available()),
                            func.max(_S.memory_total_bytes),
                            func.sum(_S.requests),
                            func.sum(_S.errors),
                            func.avg(_S.latency_p50_ms),
                            func.max(_S.latency_p99_ms),
                            func.max(_S.queue_depth),
                        )
                        .where(_S.ts >= minute, _S.ts < minute + MINUTE, _S.device_id.in_(ids))
                        .group_by(_S.device_id)
                    )
                    conn.execute(table.insert().from_select(names, query))
        except SQLAlchemyError as exc:
            raise DatabaseError(f"cannot refresh telemetry rollups: {describe(exc)}") from exc
        return sum(len(d) for d in by_minute.values())

    def prune(self, now: datetime, retention: Retention) -> tuple[int, int]:
        """Delete raw samples and rollups past their retention; (samples, rollups) deleted."""
        raw_cut = now - timedelta(seconds=retention.raw_s)
        rollup_cut = now - timedelta(seconds=retention.rollup_s)
        try:
            with self._engine.begin() as conn:
                samples = conn.execute(delete(_SAMPLES).where(_S.ts < raw_cut))
                rollups = conn.execute(delete(_ROLLUPS).where(_R.bucket < rollup_cut))
                return int(samples.rowcount), int(rollups.rowcount)
        except SQLAlchemyError as exc:
            raise DatabaseError(f"cannot prune telemetry: {describe(exc)}") from exc

    # --- reads -------------------------------------------------------------------------------

    def vitals(self, since: datetime) -> dict[str, Vitals]:
        """Each device's telemetry summary since ``since`` (devices without samples absent)."""
        query = select(
            _S.device_id,
            func.count(),
            func.sum(_S.requests),
            func.sum(_S.errors),
            func.max(_S.latency_p99_ms),
            func.max(_S.temperature_max_c),
            func.min(_available()),
            func.max(_S.memory_total_bytes),
            func.max(_S.ts),
        ).where(_S.ts >= since)
        rows = self._read(query.group_by(_S.device_id))
        out: dict[str, Vitals] = {}
        for r in rows:
            last = r[8]
            if isinstance(last, str):  # SQLite returns MAX() of a datetime column as text
                last = datetime.fromisoformat(last)
            if last is not None and last.tzinfo is None:
                last = last.replace(tzinfo=timezone.utc)
            out[str(r[0])] = Vitals(
                samples=int(r[1]),
                requests=int(r[2] or 0),
                errors=int(r[3] or 0),
                p99_ms=r[4],
                temperature_c=r[5],
                memory_available_bytes=None if r[6] is None else int(r[6]),
                memory_total_bytes=None if r[7] is None else int(r[7]),
                last_sample_at=last,
            )
        return out

    def latest(self, device_id: str) -> dict[str, Any] | None:
        """The newest raw sample of a device as a column → value mapping."""
        query = (
            select(_SAMPLES)
            .where(_S.device_id == device_id)
            .order_by(_S.ts.desc(), _S.id.desc())
            .limit(1)
        )
        rows = self._read(query)
        return dict(rows[0]._mapping) if rows else None

    def latest_all(self) -> dict[str, dict[str, Any]]:
        """The newest raw sample of every device (one query)."""
        newest = select(_S.device_id, func.max(_S.id).label("id")).group_by(_S.device_id).subquery()
        query = select(_SAMPLES).join(newest, newest.c.id == _S.id)
        return {str(r.device_id): dict(r._mapping) for r in self._read(query)}

    def series(
        self,
        device_id: str,
        metric: str,
        start: datetime,
        end: datetime,
        step_s: float,
        rollup: str,
        source: str,
    ) -> list[tuple[datetime, float]]:
        """``metric`` of one device in [start, end), one point per ``step_s`` bucket with data.

        ``source`` is ``raw`` (samples), ``rollup`` (minute rollups) or ``auto``: raw unless
        the range starts before the raw retention, and ``rollup`` then.
        """
        if metric not in METRICS:
            raise InvalidInput(f"unknown metric {metric!r}: use one of {', '.join(METRICS)}")
        if rollup not in ROLLUPS:
            raise InvalidInput(f"unknown rollup {rollup!r}: use one of {', '.join(ROLLUPS)}")
        if end <= start:
            raise InvalidInput("the series range is empty: 'until' must be after 'since'")
        span = (end - start).total_seconds()
        if step_s <= 0 or span / step_s > MAX_POINTS:
            raise InvalidInput(
                f"step {step_s:g} s gives more than {MAX_POINTS} points over {span:.0f} s: "
                f"use step >= {math.ceil(span / MAX_POINTS)}"
            )
        raw_expr, rollup_col = METRICS[metric]
        if source == "rollup":
            ts_col, value, seconds = _R.bucket, rollup_col, _R.seconds
            where = [_R.device_id == device_id, _R.bucket >= start, _R.bucket < end]
        elif source in ("raw", "auto"):
            ts_col, value, seconds = _S.ts, raw_expr, _S.interval_s
            where = [_S.device_id == device_id, _S.ts >= start, _S.ts < end]
        else:
            raise InvalidInput(f"unknown source {source!r}: use raw, rollup or auto")
        rows = self._read(select(ts_col, value, seconds).where(*where).order_by(ts_col))
        return _bucket(rows, start, step_s, rollup, throughput=metric == "throughput_rps")

    def counts(self) -> dict[str, int]:
        """Rows per telemetry table (for /metrics and tests)."""
        samples = self._read(select(func.count()).select_from(_SAMPLES))
        rollups = self._read(select(func.count()).select_from(_ROLLUPS))
        return {"samples": int(samples[0][0]), "rollups": int(rollups[0][0])}

    def rollouts_by_state(self) -> dict[str, int]:
        """Rollouts per state, when the rollouts table (issue 5) exists; else empty."""
        try:
            with self._engine.connect() as conn:
                inspector = inspect(conn)
                if not inspector.has_table("rollouts"):
                    return {}
                if "state" not in {c["name"] for c in inspector.get_columns("rollouts")}:
                    return {}
                rows = conn.execute(text("SELECT state, COUNT(*) FROM rollouts GROUP BY state"))
                return {str(state): int(n) for state, n in rows}
        except SQLAlchemyError as exc:
            raise DatabaseError(f"cannot count rollouts: {describe(exc)}") from exc

    def rollout_progress(self, limit: int = 50) -> list[dict[str, Any]]:
        """Newest rollouts with target counts per wave and status (issue 5's tables, if any)."""
        try:
            with self._engine.connect() as conn:
                inspector = inspect(conn)
                if not (inspector.has_table("rollouts") and inspector.has_table("rollout_targets")):
                    return []
                rollouts = conn.execute(
                    text(
                        "SELECT id, model, version, state, current_wave, waves, created_at "
                        "FROM rollouts ORDER BY created_at DESC LIMIT :limit"
                    ),
                    {"limit": limit},
                ).all()
                targets = conn.execute(
                    text(
                        "SELECT rollout_id, wave, status, COUNT(*) FROM rollout_targets "
                        "GROUP BY rollout_id, wave, status"
                    )
                ).all()
        except SQLAlchemyError as exc:
            raise DatabaseError(f"cannot read rollouts: {describe(exc)}") from exc
        waves: dict[str, dict[int, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
        for rollout_id, wave, status, count in targets:
            waves[str(rollout_id)][int(wave)][str(status)] = int(count)
        return [
            {
                "id": str(r[0]),
                "model": r[1],
                "version": r[2],
                "state": r[3],
                "current_wave": r[4],
                "waves": r[5],
                "created_at": r[6],
                "targets": {w: dict(c) for w, c in sorted(waves[str(r[0])].items())},
            }
            for r in rollouts
        ]

    def _read(self, query: Any) -> list[Any]:
        try:
            with self._engine.connect() as conn:
                return list(conn.execute(query).all())
        except SQLAlchemyError as exc:
            raise DatabaseError(f"cannot read telemetry: {describe(exc)}") from exc


def _bucket(
    rows: Sequence[Any], start: datetime, step_s: float, rollup: str, *, throughput: bool
) -> list[tuple[datetime, float]]:
    groups: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for ts, value, seconds in rows:
        if value is None:
            continue
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=timezone.utc)
        index = int((ts - start).total_seconds() // step_s)
        groups[index].append((float(value), float(seconds or 0.0)))
    points: list[tuple[datetime, float]] = []
    for index in sorted(groups):
        values = [v for v, _ in groups[index]]
        if throughput:
            covered = sum(s for _, s in groups[index]) or step_s
            result = sum(values) / covered
        elif rollup == "avg":
            result = sum(values) / len(values)
        elif rollup == "min":
            result = min(values)
        elif rollup == "max":
            result = max(values)
        elif rollup == "sum":
            result = sum(values)
        else:
            result = values[-1]
        points.append((start + timedelta(seconds=index * step_s), result))
    return points
