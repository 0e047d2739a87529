"""Static delegate analysis stored with each model version.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_versions") as batch:
        batch.add_column(sa.Column("analysis", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model_versions") as batch:
        batch.drop_column("analysis")
