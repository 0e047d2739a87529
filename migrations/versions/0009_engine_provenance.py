"""Who uploaded each engine build, who approved it for twins, and the trust mode per class.

``engine_tunings`` gains the uploader (``device``, ``operator``), its device id or token name, the
device's hardware class and the approval (operator, time). Builds stored before this revision
get uploader ``unknown`` and no approval: nobody authenticated their builder (the probe of issue
19 showed a device could store one for any validity), so under the default trust mode
(``approval``) twins stop pulling them until an operator approves them or trusts device builds
(``jetfleet engines approve`` / ``jetfleet engines trust``). Devices keep the engines they
already cached. ``engine_trust`` holds the per-class mode (``devices`` or ``approval``).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("engine_tunings", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("uploader", sa.String(length=16), server_default="unknown", nullable=False)
        )
        batch_op.add_column(sa.Column("uploaded_by", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("hardware_class", sa.String(length=128), nullable=True))
        batch_op.add_column(sa.Column("approved_by", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("approved_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "engine_trust",
        sa.Column("hardware_class", sa.String(length=128), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("set_by", sa.String(length=64), nullable=True),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("hardware_class", name=op.f("pk_engine_trust")),
    )


def downgrade() -> None:
    op.drop_table("engine_trust")
    with op.batch_alter_table("engine_tunings", schema=None) as batch_op:
        batch_op.drop_column("approved_at")
        batch_op.drop_column("approved_by")
        batch_op.drop_column("hardware_class")
        batch_op.drop_column("uploaded_by")
        batch_op.drop_column("uploader")
