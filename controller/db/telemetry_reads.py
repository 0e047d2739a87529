"""The read side of telemetry: vitals over a window, newest samples, chart series, row counts.

Charts read raw samples for recent ranges and the per-minute rollups for older ones (raw samples
are pruned first, see :class:`~controller.db.telemetry_store.Retention`). SQLAlchemy errors
become :class:`DatabaseError` here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql.elements import ColumnElement

from controller.db.session import describe
from controller.db.telemetry_rows import ROLLUP_ROWS, SAMPLES, R, S, available
from controller.errors import DatabaseError, InvalidInput
from controller.records import Vitals

MAX_POINTS = 5000

# metric name → (raw sample expression, rollup column)
METRICS: dict[str, tuple[ColumnElement[Any], ColumnElement[Any]]] = {
    "cpu_percent": (S.cpu_percent, R.cpu_avg),
    "gpu_load_percent": (S.gpu_load_percent, R.gpu_load_avg),
    "temperature_c": (S.temperature_max_c, R.temperature_max_c),
    "power_mw": (S.power_mw, R.power_avg_mw),
    "memory_used_bytes": (S.memory_used_bytes, R.memory_used_avg_bytes),
    "memory_available_bytes": (available(), R.memory_available_min_bytes),
    "latency_p50_ms": (S.latency_p50_ms, R.latency_p50_avg_ms),
    "latency_p99_ms": (S.latency_p99_ms, R.latency_p99_max_ms),
    "queue_depth": (S.queue_depth, R.queue_depth_max),
    "requests": (S.requests, R.requests),
    "errors": (S.errors, R.errors),
    "throughput_rps": (S.requests, R.requests),
}
ROLLUPS = ("avg", "min", "max", "sum", "last")


class TelemetryReads:
    """Read queries over ``telemetry_samples`` and ``telemetry_rollups``."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._pg = engine.dialect.name == "postgresql"

    def vitals(self, since: datetime) -> dict[str, Vitals]:
        """Each device's telemetry summary since ``since`` (devices without samples absent)."""
        query = select(
            S.device_id,
            func.count(),
            func.sum(S.requests),
            func.sum(S.errors),
            func.max(S.latency_p99_ms),
            func.max(S.temperature_max_c),
            func.min(available()),
            func.max(S.memory_total_bytes),
            func.max(S.ts),
        ).where(S.ts >= since)
        rows = self._read(query.group_by(S.device_id))
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
            select(SAMPLES)
            .where(S.device_id == device_id)
            .order_by(S.ts.desc(), S.id.desc())
            .limit(1)
        )
        rows = self._read(query)
        return dict(rows[0]._mapping) if rows else None

    def latest_all(self) -> dict[str, dict[str, Any]]:
        """The newest raw sample of every device (one query)."""
        newest = select(S.device_id, func.max(S.id).label("id")).group_by(S.device_id).subquery()
        query = select(SAMPLES).join(newest, newest.c.id == S.id)
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
            ts_col, value, seconds = R.bucket, rollup_col, R.seconds
            where = [R.device_id == device_id, R.bucket >= start, R.bucket < end]
        elif source in ("raw", "auto"):
            ts_col, value, seconds = S.ts, raw_expr, S.interval_s
            where = [S.device_id == device_id, S.ts >= start, S.ts < end]
        else:
            raise InvalidInput(f"unknown source {source!r}: use raw, rollup or auto")
        rows = self._read(select(ts_col, value, seconds).where(*where).order_by(ts_col))
        return _bucket(rows, start, step_s, rollup, throughput=metric == "throughput_rps")

    def counts(self) -> dict[str, int]:
        """Rows per telemetry table (for /metrics and tests)."""
        samples = self._read(select(func.count()).select_from(SAMPLES))
        rollups = self._read(select(func.count()).select_from(ROLLUP_ROWS))
        return {"samples": int(samples[0][0]), "rollups": int(rollups[0][0])}

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
