"""Tables of rollouts (state machine, targets, audit trail). Same ``Base`` as schema.py.

``rollout_claims`` is what makes "one active rollout per device" hold under concurrency: its
primary key is the device, so two rollouts claiming one device cannot both commit.
``controller_leases`` elects the one replica that runs the rollout loop.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from controller.db.schema import Base, utcnow

__all__ = ["Base", "ControllerLease", "RolloutAuditRow", "RolloutClaim", "RolloutRow", "TargetRow"]


class RolloutRow(Base):
    """One rollout: its spec (JSON), its state and a pending operator request."""

    __tablename__ = "rollouts"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    model: Mapped[str] = mapped_column(String(64))
    version: Mapped[str] = mapped_column(String(64))
    config: Mapped[str | None] = mapped_column(String(64))
    spec: Mapped[dict[str, Any]] = mapped_column(default=dict)
    state: Mapped[str] = mapped_column(String(16), index=True)
    reason: Mapped[str | None] = mapped_column(Text)
    requested_op: Mapped[str | None] = mapped_column(String(16))
    requested_by: Mapped[str | None] = mapped_column(String(64))
    current_wave: Mapped[int] = mapped_column(Integer, default=0)
    waves: Mapped[int] = mapped_column(Integer, default=1)
    created_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]


class TargetRow(Base):
    """One device of a rollout: wave, status, what it had before, the generation sent."""

    __tablename__ = "rollout_targets"
    __table_args__ = (UniqueConstraint("rollout_id", "device_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    rollout_id: Mapped[str] = mapped_column(String(40), ForeignKey("rollouts.id"), index=True)
    device_id: Mapped[str] = mapped_column(String(64))
    wave: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    previous: Mapped[dict[str, Any] | None]
    generation: Mapped[int | None] = mapped_column(Integer)
    started_at: Mapped[datetime | None]
    validated_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    baseline: Mapped[dict[str, Any] | None]


class RolloutClaim(Base):
    """Device ``device_id`` belongs to the active rollout ``rollout_id``."""

    __tablename__ = "rollout_claims"

    device_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    rollout_id: Mapped[str] = mapped_column(String(40), ForeignKey("rollouts.id"), index=True)


class RolloutAuditRow(Base):
    """One transition of a rollout or of one of its devices, with actor and reason."""

    __tablename__ = "rollout_audit"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    rollout_id: Mapped[str] = mapped_column(String(40), ForeignKey("rollouts.id"), index=True)
    ts: Mapped[datetime]
    actor: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    from_state: Mapped[str | None] = mapped_column(String(16))
    to_state: Mapped[str | None] = mapped_column(String(16))
    device_id: Mapped[str | None] = mapped_column(String(64))
    reason: Mapped[str] = mapped_column(Text, default="")


class ControllerLease(Base):
    """A named leadership lease (``rollouts``): ``holder`` runs that loop until ``expires_at``."""

    __tablename__ = "controller_leases"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[datetime]
