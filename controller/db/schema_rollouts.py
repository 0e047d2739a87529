"""Tables of rollouts (state machine, targets, audit trail): issue 5. Same ``Base`` as schema.py."""

from __future__ import annotations

from controller.db.schema import Base

__all__ = ["Base"]
