"""Warm-up inputs stored with each model version.

``model_versions.warmup`` (JSON, null for versions pushed before this revision): the shapes and
values the operator gave at push (``--shape``, ``--value``, ``--inputs``), why reference outputs
could not be computed, and whether ONNX Runtime failed on the inputs it was given (then the
version's warm-up inputs are unknown and deploys are refused until the operator gives them).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_versions") as batch:
        batch.add_column(sa.Column("warmup", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model_versions") as batch:
        batch.drop_column("warmup")
