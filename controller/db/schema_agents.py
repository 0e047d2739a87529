"""Tables of agent releases (revision 0014). Same ``Base`` as schema.py.

``agent_releases``: one row per pushed agent release, architecture and JetPack lines (an
aarch64 release is built for the system Python of one JetPack line), its bytes an artifact
(content-addressed, like a model's), its manifest signed with the fleet key (kind ``agent``).
What each device reports of its agent and what it is ordered to run are columns of
``devices`` (:class:`controller.db.schema.Device`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from controller.db.schema import Base, utcnow

__all__ = ["AgentReleaseRow", "Base"]


class AgentReleaseRow(Base):
    """One agent release for one architecture (and JetPack lines): its artifact, metadata and
    signed manifest."""

    __tablename__ = "agent_releases"
    __table_args__ = (UniqueConstraint("version", "arch", "lines"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    version: Mapped[str] = mapped_column(String(64))
    arch: Mapped[str] = mapped_column(String(16))
    format: Mapped[str] = mapped_column(String(16))
    sha256: Mapped[str] = mapped_column(String(64), ForeignKey("artifacts.sha256"))
    size: Mapped[int] = mapped_column(BigInteger)
    python: Mapped[str | None] = mapped_column(String(64))
    """The Python the release runs on (``release.json``'s ``python``, a .deb's dependency)."""
    jetpack: Mapped[list[Any]] = mapped_column(default=list)
    """The JetPack lines the release supports (empty: any)."""
    lines: Mapped[str] = mapped_column(String(32), default="")
    """``jetpack`` sorted and joined with commas (``""``: any): part of the release's key."""
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)
    """The rest of the release's own metadata (the .deb's control fields, ``release.json``)."""
    signed_manifest: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    """The release's manifest (kind ``agent``) signed with the fleet key."""
    pushed_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
