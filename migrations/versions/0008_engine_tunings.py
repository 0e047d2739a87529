"""Engine manifests per (engine key, tuning tag); build leases per (engine key, tuning tag).

Every existing ``engines`` row is copied into ``engine_tunings`` under the tuning tag of its
manifest (power mode name, ``+clocks`` when jetson_clocks was on, ``default`` when unknown: the
label of ``shared.engine_keys.TuningTag`` as of this revision). ``build_leases`` is recreated
with the tuning in its primary key: leases live minutes, and a builder renews its lease, so one
that was held during the upgrade is simply asked for again.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def _label(manifest: Any) -> str:
    """The tuning tag of a stored manifest (JSON text on some drivers, a dict on others)."""
    if isinstance(manifest, str):
        manifest = json.loads(manifest)
    tuning = (manifest.get("tuning") or {}) if isinstance(manifest, dict) else {}
    mode = tuning.get("power_mode") or "default"
    return f"{mode}+clocks" if tuning.get("jetson_clocks") else str(mode)


def _build_leases(with_tuning: bool) -> None:
    columns = [sa.Column("engine_key", sa.String(length=64), nullable=False)]
    if with_tuning:
        columns.append(sa.Column("tuning", sa.String(length=128), nullable=False))
    op.create_table(
        "build_leases",
        *columns,
        sa.Column("holder", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(
            *(["engine_key", "tuning"] if with_tuning else ["engine_key"]),
            name=op.f("pk_build_leases"),
        ),
    )


def upgrade() -> None:
    tunings = op.create_table(
        "engine_tunings",
        sa.Column("engine_key", sa.String(length=64), nullable=False),
        sa.Column("tuning", sa.String(length=128), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("built_by", sa.String(length=64), nullable=False),
        sa.Column("manifest", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["engine_key"],
            ["engines.engine_key"],
            name=op.f("fk_engine_tunings_engine_key_engines"),
        ),
        sa.ForeignKeyConstraint(
            ["sha256"], ["artifacts.sha256"], name=op.f("fk_engine_tunings_sha256_artifacts")
        ),
        sa.PrimaryKeyConstraint("engine_key", "tuning", name=op.f("pk_engine_tunings")),
    )
    assert tunings is not None
    engines = sa.table(
        "engines",
        sa.column("engine_key", sa.String()),
        sa.column("sha256", sa.String()),
        sa.column("size", sa.BigInteger()),
        sa.column("built_by", sa.String()),
        sa.column("manifest", sa.JSON()),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    rows = op.get_bind().execute(sa.select(engines)).mappings().all()
    if rows:
        op.bulk_insert(tunings, [dict(row) | {"tuning": _label(row["manifest"])} for row in rows])
    op.drop_table("build_leases")
    _build_leases(with_tuning=True)


def downgrade() -> None:
    op.drop_table("build_leases")
    _build_leases(with_tuning=False)
    op.drop_table("engine_tunings")
