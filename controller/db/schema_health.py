"""Tables of the telemetry read side (rollups, health): issue 6. Same ``Base`` as schema.py."""

from __future__ import annotations

from controller.db.schema import Base

__all__ = ["Base"]
