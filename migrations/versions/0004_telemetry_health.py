"""Telemetry ingest v2: health columns on telemetry_samples, per-minute rollups.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_FLOATS = (
    "latency_p50_ms",
    "latency_p99_ms",
    "gpu_load_percent",
    "temperature_max_c",
    "power_mw",
)
_BIGINTS = (
    "memory_available_bytes",
    "largest_free_block_bytes",
    "nvmap_used_bytes",
    "disk_free_bytes",
    "spool_dropped",
)
_INTS = ("queue_depth", "swaps")


def upgrade() -> None:
    with op.batch_alter_table("telemetry_samples") as batch:
        batch.add_column(sa.Column("requests", sa.BigInteger(), server_default="0", nullable=False))
        batch.add_column(sa.Column("errors", sa.BigInteger(), server_default="0", nullable=False))
        for name in _FLOATS:
            batch.add_column(sa.Column(name, sa.Float(), nullable=True))
        for name in _BIGINTS:
            batch.add_column(sa.Column(name, sa.BigInteger(), nullable=True))
        for name in _INTS:
            batch.add_column(sa.Column(name, sa.Integer(), nullable=True))
        batch.add_column(sa.Column("extra", sa.JSON(), nullable=True))
    op.create_index(
        "ix_telemetry_samples_device_id_ts", "telemetry_samples", ["device_id", "ts"], unique=False
    )
    op.create_index("ix_telemetry_samples_ts", "telemetry_samples", ["ts"], unique=False)
    op.create_table(
        "telemetry_rollups",
        sa.Column("device_id", sa.String(length=64), nullable=False),
        sa.Column("bucket", sa.DateTime(timezone=True), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("cpu_avg", sa.Float(), nullable=True),
        sa.Column("cpu_max", sa.Float(), nullable=True),
        sa.Column("gpu_load_avg", sa.Float(), nullable=True),
        sa.Column("temperature_max_c", sa.Float(), nullable=True),
        sa.Column("power_avg_mw", sa.Float(), nullable=True),
        sa.Column("memory_used_avg_bytes", sa.Float(), nullable=True),
        sa.Column("memory_available_min_bytes", sa.BigInteger(), nullable=True),
        sa.Column("memory_total_bytes", sa.BigInteger(), nullable=True),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("errors", sa.BigInteger(), nullable=False),
        sa.Column("latency_p50_avg_ms", sa.Float(), nullable=True),
        sa.Column("latency_p99_max_ms", sa.Float(), nullable=True),
        sa.Column("queue_depth_max", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["device_id"], ["devices.id"], name=op.f("fk_telemetry_rollups_device_id_devices")
        ),
        sa.PrimaryKeyConstraint("device_id", "bucket", name=op.f("pk_telemetry_rollups")),
    )
    op.create_index(
        op.f("ix_telemetry_rollups_bucket"), "telemetry_rollups", ["bucket"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_telemetry_rollups_bucket"), table_name="telemetry_rollups")
    op.drop_table("telemetry_rollups")
    op.drop_index("ix_telemetry_samples_ts", table_name="telemetry_samples")
    op.drop_index("ix_telemetry_samples_device_id_ts", table_name="telemetry_samples")
    with op.batch_alter_table("telemetry_samples") as batch:
        for name in ("extra", *_INTS, *_BIGINTS, *_FLOATS, "errors", "requests"):
            batch.drop_column(name)
