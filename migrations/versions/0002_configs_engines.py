"""Delegate config layers, deployment config names, Q/DQ flag, engine store and build leases.

Revision ID: 0002
Revises: 0001
Create Date: 2026-02-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_versions") as batch:
        batch.add_column(
            sa.Column("has_qdq", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    with op.batch_alter_table("deployments") as batch:
        batch.add_column(sa.Column("config", sa.String(length=64), nullable=True))
    op.create_table(
        "delegate_config_layers",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=256), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_delegate_config_layers")),
        sa.UniqueConstraint("name", "scope", name=op.f("uq_delegate_config_layers_name_scope")),
    )
    op.create_index(
        op.f("ix_delegate_config_layers_name"), "delegate_config_layers", ["name"], unique=False
    )
    op.create_table(
        "engines",
        sa.Column("engine_key", sa.String(length=64), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("built_by", sa.String(length=64), nullable=False),
        sa.Column("manifest", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["sha256"], ["artifacts.sha256"], name=op.f("fk_engines_sha256_artifacts")
        ),
        sa.PrimaryKeyConstraint("engine_key", name=op.f("pk_engines")),
    )
    op.create_table(
        "build_leases",
        sa.Column("engine_key", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("engine_key", name=op.f("pk_build_leases")),
    )


def downgrade() -> None:
    op.drop_table("build_leases")
    op.drop_table("engines")
    op.drop_index(op.f("ix_delegate_config_layers_name"), table_name="delegate_config_layers")
    op.drop_table("delegate_config_layers")
    with op.batch_alter_table("deployments") as batch:
        batch.drop_column("config")
    with op.batch_alter_table("model_versions") as batch:
        batch.drop_column("has_qdq")
