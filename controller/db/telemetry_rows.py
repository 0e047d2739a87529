"""Telemetry messages as ``telemetry_samples`` rows: column order, JSON columns, time buckets.

What health and charts query are columns; the rest of a sample goes into the JSON ``extra``
column (migration 0004). Shared by the batched writer (:mod:`controller.db.telemetry_store`)
and the read queries (:mod:`controller.db.telemetry_reads`).

A sample the controller stored at its receive time because the device dated it too far ahead
(:class:`RedatedTelemetry`, made by :mod:`controller.ingest.sample_guard`) keeps the device's
own time in ``extra`` under :data:`DEVICE_TS`, so the stored row says it was re-dated.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, cast

from pydantic import Field, TypeAdapter
from sqlalchemy import Table, func
from sqlalchemy.sql.elements import ColumnElement

from controller.db.schema import TelemetrySample
from controller.db.schema_health import TelemetryRollup
from shared.telemetry import ModelStats, Telemetry

SAMPLES = cast(Table, TelemetrySample.__table__)
ROLLUP_ROWS = cast(Table, TelemetryRollup.__table__)
S = SAMPLES.c
R = ROLLUP_ROWS.c
SAMPLE_COLUMNS = (
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
DEVICE_TS = "device_ts"
"""``extra`` key of a re-dated sample: the time the device gave it (ISO 8601)."""


class RedatedTelemetry(Telemetry):
    """A sample stored at the controller's receive time (its ``ts``) instead of the time its
    device gave it (``device_ts``), which was too far in the future: see
    :mod:`controller.ingest.sample_guard`. Never on the wire."""

    device_ts: datetime = Field(exclude=True)


_MODELS_JSON = TypeAdapter(tuple[ModelStats, ...])
"""One serializer call for a sample's models: ``model_dump`` per model cost more than the rest
of the row together (the ingest profile showed it)."""


def available() -> ColumnElement[Any]:
    """A sample's available memory, falling back to total - used for agents that do not say."""
    return func.coalesce(S.memory_available_bytes, S.memory_total_bytes - S.memory_used_bytes)


def sample_values(msg: Telemetry, *, json_text: bool) -> tuple[Any, ...]:
    """The ``telemetry_samples`` row of one message, in ``SAMPLE_COLUMNS`` order.

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
    if isinstance(msg, RedatedTelemetry):
        extra[DEVICE_TS] = aware(msg.device_ts).isoformat()
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
        aware(msg.ts),
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
    return dict(zip(SAMPLE_COLUMNS, sample_values(msg, json_text=False), strict=True))


def aware(ts: datetime) -> datetime:
    """A timestamp without an offset is UTC (the wire contract's times are UTC)."""
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


def minute_of(ts: datetime) -> datetime:
    """Start of the UTC minute holding ``ts``."""
    return ts.astimezone(timezone.utc).replace(second=0, microsecond=0)
