"""Engine keys TensorRT could not build, remembered for the device's twins.

``engine_failures``: one row per engine key whose TensorRT build failed for reasons of the model
(the parser refused it, a layer is unsupported, the build child died by a signal), with the
device that reported it and TensorRT's words. Twins asking for that key serve the version on
ONNX Runtime at once. An operator clears a row with ``jetfleet engines forget-failure KEY``; a
new TensorRT release or build config is another key anyway.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "engine_failures",
        sa.Column("engine_key", sa.String(length=64), nullable=False),
        sa.Column("device_id", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=2000), nullable=False),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("engine_key", name=op.f("pk_engine_failures")),
    )


def downgrade() -> None:
    op.drop_table("engine_failures")
