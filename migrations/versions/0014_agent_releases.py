"""Agent releases and what devices report of their agent.

``agent_releases``: one row per pushed agent release, architecture and JetPack lines (``lines``:
an aarch64 release is built for one line's system Python) (version, format, the
artifact's sha256 and size, the Python and JetPack lines it supports, its other metadata, the
manifest signed with the fleet key, who pushed it). ``devices`` gains ``agent_version`` and
``agent_update`` (what the device reports) and ``agent_order`` (the release its desired
document orders, set by an agent rollout). Existing rows keep NULLs: nothing is ordered.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_releases",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("arch", sa.String(length=16), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("python", sa.String(length=64), nullable=True),
        sa.Column("jetpack", sa.JSON(), nullable=False),
        sa.Column("lines", sa.String(length=32), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("signed_manifest", sa.JSON(), nullable=True),
        sa.Column("pushed_by", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["sha256"],
            ["artifacts.sha256"],
            name=op.f("fk_agent_releases_sha256_artifacts"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_releases")),
        sa.UniqueConstraint(
            "version", "arch", "lines", name=op.f("uq_agent_releases_version_arch_lines")
        ),
    )
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.add_column(sa.Column("agent_version", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("agent_update", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("agent_order", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.drop_column("agent_order")
        batch_op.drop_column("agent_update")
        batch_op.drop_column("agent_version")
    op.drop_table("agent_releases")
