"""The hardware class each device may upload engines for, fixed when it was first seen.

``devices.pinned_class``: the class its first reported facts gave (or the class an operator
accepted: ``jetfleet devices accept-class``). Before this revision the engine store trusted the
class of a device's *latest* report, so a gateway credential could report another hardware
profile and then upload an engine for that class. Existing devices are pinned to
the class of the facts stored now, computed here with the same derivation the controller uses
(``shared.hardware_class``), so the upgrade fixes what each device was when it was taken.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op
from pydantic import ValidationError

from shared.facts import DeviceFacts
from shared.hardware_class import hardware_class

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pinned_class", sa.String(length=160), nullable=True))
    devices = sa.table(
        "devices",
        sa.column("id", sa.String),
        sa.column("facts", sa.JSON),
        sa.column("pinned_class", sa.String),
    )
    bind = op.get_bind()
    rows = bind.execute(sa.select(devices.c.id, devices.c.facts)).all()
    for device_id, stored in rows:
        pinned = _class_of(stored)
        if pinned is not None:
            bind.execute(
                devices.update().where(devices.c.id == device_id).values(pinned_class=pinned)
            )


def _class_of(stored: Any) -> str | None:
    if isinstance(stored, str):
        stored = json.loads(stored)
    if not stored:
        return None
    try:
        return hardware_class(DeviceFacts.model_validate(stored))
    except ValidationError:
        return None


def downgrade() -> None:
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.drop_column("pinned_class")
