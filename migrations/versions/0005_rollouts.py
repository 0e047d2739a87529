"""Rollouts: state machine, targets, device claims, audit trail, controller leases.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _ts(name: str, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "rollouts",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("model", sa.String(length=64), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("config", sa.String(length=64), nullable=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("requested_op", sa.String(length=16), nullable=True),
        sa.Column("requested_by", sa.String(length=64), nullable=True),
        sa.Column("current_wave", sa.Integer(), nullable=False),
        sa.Column("waves", sa.Integer(), nullable=False),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
        _ts("started_at", nullable=True),
        _ts("finished_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollouts")),
    )
    op.create_index(op.f("ix_rollouts_state"), "rollouts", ["state"], unique=False)
    op.create_table(
        "rollout_targets",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("rollout_id", sa.String(length=40), nullable=False),
        sa.Column("device_id", sa.String(length=64), nullable=False),
        sa.Column("wave", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("previous", sa.JSON(), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=True),
        _ts("started_at", nullable=True),
        _ts("validated_at", nullable=True),
        _ts("finished_at", nullable=True),
        sa.Column("baseline", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["rollout_id"], ["rollouts.id"], name=op.f("fk_rollout_targets_rollout_id_rollouts")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollout_targets")),
        sa.UniqueConstraint(
            "rollout_id", "device_id", name=op.f("uq_rollout_targets_rollout_id_device_id")
        ),
    )
    op.create_index(
        op.f("ix_rollout_targets_rollout_id"), "rollout_targets", ["rollout_id"], unique=False
    )
    op.create_table(
        "rollout_claims",
        sa.Column("device_id", sa.String(length=64), nullable=False),
        sa.Column("rollout_id", sa.String(length=40), nullable=False),
        sa.ForeignKeyConstraint(
            ["rollout_id"], ["rollouts.id"], name=op.f("fk_rollout_claims_rollout_id_rollouts")
        ),
        sa.PrimaryKeyConstraint("device_id", name=op.f("pk_rollout_claims")),
    )
    op.create_index(
        op.f("ix_rollout_claims_rollout_id"), "rollout_claims", ["rollout_id"], unique=False
    )
    op.create_table(
        "rollout_audit",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("rollout_id", sa.String(length=40), nullable=False),
        _ts("ts"),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("from_state", sa.String(length=16), nullable=True),
        sa.Column("to_state", sa.String(length=16), nullable=True),
        sa.Column("device_id", sa.String(length=64), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["rollout_id"], ["rollouts.id"], name=op.f("fk_rollout_audit_rollout_id_rollouts")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollout_audit")),
    )
    op.create_index(
        op.f("ix_rollout_audit_rollout_id"), "rollout_audit", ["rollout_id"], unique=False
    )
    op.create_table(
        "controller_leases",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=False),
        _ts("expires_at"),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_controller_leases")),
    )


def downgrade() -> None:
    op.drop_table("controller_leases")
    op.drop_index(op.f("ix_rollout_audit_rollout_id"), table_name="rollout_audit")
    op.drop_table("rollout_audit")
    op.drop_index(op.f("ix_rollout_claims_rollout_id"), table_name="rollout_claims")
    op.drop_table("rollout_claims")
    op.drop_index(op.f("ix_rollout_targets_rollout_id"), table_name="rollout_targets")
    op.drop_table("rollout_targets")
    op.drop_index(op.f("ix_rollouts_state"), table_name="rollouts")
    op.drop_table("rollouts")
