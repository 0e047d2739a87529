"""Tables of the telemetry read side (rollups, health). Same ``Base`` as schema.py.

Raw samples stay in ``telemetry_samples`` (schema.py; migration 0004 gave it the columns health
and charts query, plus one JSON ``extra`` column for the detail only shown, never aggregated).
``telemetry_rollups`` holds one row per device and minute, recomputed from the raw samples
whenever a sample of that minute arrives (late, spooled samples included), so a rollup always
equals what the raw data said while it was kept.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from controller.db.schema import Base, TelemetrySample

__all__ = ["Base", "TelemetryRollup"]

# Range reads per device, and retention's ``DELETE ... WHERE ts < cutoff``.
Index("ix_telemetry_samples_device_id_ts", TelemetrySample.device_id, TelemetrySample.ts)
Index("ix_telemetry_samples_ts", TelemetrySample.ts)


class TelemetryRollup(Base):
    """One device's samples of one minute, aggregated (kept longer than the raw samples)."""

    __tablename__ = "telemetry_rollups"

    device_id: Mapped[str] = mapped_column(String(64), ForeignKey("devices.id"), primary_key=True)
    bucket: Mapped[datetime] = mapped_column(primary_key=True, index=True)
    """Start of the minute (UTC)."""
    samples: Mapped[int] = mapped_column(Integer)
    seconds: Mapped[float] = mapped_column(Float)
    """Sum of the samples' intervals: the time the counters cover."""
    cpu_avg: Mapped[float | None] = mapped_column(Float)
    cpu_max: Mapped[float | None] = mapped_column(Float)
    gpu_load_avg: Mapped[float | None] = mapped_column(Float)
    temperature_max_c: Mapped[float | None] = mapped_column(Float)
    power_avg_mw: Mapped[float | None] = mapped_column(Float)
    memory_used_avg_bytes: Mapped[float | None] = mapped_column(Float)
    memory_available_min_bytes: Mapped[int | None] = mapped_column(BigInteger)
    memory_total_bytes: Mapped[int | None] = mapped_column(BigInteger)
    requests: Mapped[int] = mapped_column(BigInteger)
    errors: Mapped[int] = mapped_column(BigInteger)
    latency_p50_avg_ms: Mapped[float | None] = mapped_column(Float)
    latency_p99_max_ms: Mapped[float | None] = mapped_column(Float)
    queue_depth_max: Mapped[int | None] = mapped_column(Integer)
