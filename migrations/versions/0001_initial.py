"""Initial schema: devices, models, versions, artifacts, deployments, telemetry, events.

Revision ID: 0001
Revises:
Create Date: 2026-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "artifacts",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_artifacts")),
    )
    op.create_table(
        "devices",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("online", sa.Boolean(), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=True),
        sa.Column("desired_generation", sa.Integer(), nullable=False),
        sa.Column("observed_generation", sa.Integer(), nullable=True),
        sa.Column("facts", sa.JSON(), nullable=True),
        sa.Column("reported_slots", sa.JSON(), nullable=False),
        sa.Column("serve_url", sa.String(length=512), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_devices")),
    )
    op.create_table(
        "models",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_models")),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("device_id", sa.String(length=64), nullable=False),
        sa.Column("event_id", sa.String(length=128), nullable=False),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("slot", sa.String(length=64), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["device_id"], ["devices.id"], name=op.f("fk_events_device_id_devices")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint("device_id", "event_id", name=op.f("uq_events_device_id_event_id")),
    )
    op.create_index(op.f("ix_events_device_id"), "events", ["device_id"], unique=False)
    op.create_table(
        "model_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model", sa.String(length=64), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("outputs", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["model"], ["models.name"], name=op.f("fk_model_versions_model_models")
        ),
        sa.ForeignKeyConstraint(
            ["sha256"], ["artifacts.sha256"], name=op.f("fk_model_versions_sha256_artifacts")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_versions")),
        sa.UniqueConstraint("model", "version", name=op.f("uq_model_versions_model_version")),
    )
    op.create_table(
        "telemetry_samples",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("device_id", sa.String(length=64), nullable=False),
        sa.Column("sample_id", sa.String(length=128), nullable=False),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
        sa.Column("interval_s", sa.Float(), nullable=False),
        sa.Column("cpu_percent", sa.Float(), nullable=False),
        sa.Column("memory_used_bytes", sa.BigInteger(), nullable=False),
        sa.Column("memory_total_bytes", sa.BigInteger(), nullable=False),
        sa.Column("models", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["device_id"], ["devices.id"], name=op.f("fk_telemetry_samples_device_id_devices")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_telemetry_samples")),
        sa.UniqueConstraint(
            "device_id", "sample_id", name=op.f("uq_telemetry_samples_device_id_sample_id")
        ),
    )
    op.create_index(
        op.f("ix_telemetry_samples_device_id"), "telemetry_samples", ["device_id"], unique=False
    )
    op.create_table(
        "deployments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("device_id", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=64), nullable=False),
        sa.Column("model_version_id", sa.Integer(), nullable=False),
        sa.Column("delegate", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["device_id"], ["devices.id"], name=op.f("fk_deployments_device_id_devices")
        ),
        sa.ForeignKeyConstraint(
            ["model"], ["models.name"], name=op.f("fk_deployments_model_models")
        ),
        sa.ForeignKeyConstraint(
            ["model_version_id"],
            ["model_versions.id"],
            name=op.f("fk_deployments_model_version_id_model_versions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deployments")),
        sa.UniqueConstraint("device_id", "model", name=op.f("uq_deployments_device_id_model")),
    )


def downgrade() -> None:
    op.drop_table("deployments")
    op.drop_index(op.f("ix_telemetry_samples_device_id"), table_name="telemetry_samples")
    op.drop_table("telemetry_samples")
    op.drop_table("model_versions")
    op.drop_index(op.f("ix_events_device_id"), table_name="events")
    op.drop_table("events")
    op.drop_table("models")
    op.drop_table("devices")
    op.drop_table("artifacts")
