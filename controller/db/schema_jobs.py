"""The ``jobs`` table: profiling and tuning jobs sent to devices. Same ``Base``.

A job is created ``pending``, carried in its device's desired document until it finishes, moves to
``running`` with its first progress event and ends ``succeeded``, ``failed`` or ``cancelled``.
``progress`` keeps the progress events in order (each with its event id, so a replay adds none
twice); ``result`` is the agent's :class:`shared.jobs.JobOutcome`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from controller.db.schema import Base, utcnow

__all__ = ["Base", "JobRow"]


class JobRow(Base):
    """One job: what was asked (the wire job), where it stands, and what came back."""

    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_device_id_status", "device_id", "status"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    device_id: Mapped[str] = mapped_column(String(64), ForeignKey("devices.id"))
    model: Mapped[str] = mapped_column(String(64), index=True)
    version: Mapped[str | None] = mapped_column(String(64))
    request: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[str] = mapped_column(String(16), index=True)
    progress: Mapped[list[Any]] = mapped_column(default=list)
    result: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    apply: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    """``{"hardware_class", "config"}``: store the recommendation as that class layer."""
    applied: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]
