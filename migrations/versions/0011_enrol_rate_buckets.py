"""Enrolment rate-limit buckets in the database, shared by controller replicas.

``enrol_rate_buckets``: one row per client address that tried ``POST /api/v1/enroll`` in the last
minute or so (tokens left, when; seconds since the epoch). Before this revision each controller
process kept its own buckets in memory, so N replicas let N times the configured burst through.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "enrol_rate_buckets",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_enrol_rate_buckets")),
    )
    op.create_index(op.f("ix_enrol_rate_buckets_at"), "enrol_rate_buckets", ["at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_enrol_rate_buckets_at"), table_name="enrol_rate_buckets")
    op.drop_table("enrol_rate_buckets")
