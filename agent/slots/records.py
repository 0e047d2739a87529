"""The agent's record of one model slot, as the reconcile loop keeps it and reports it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from agent.engines.resolver import Resolved
from shared.messages import SlotPhase, SlotStatus


def utcnow() -> datetime:
    """Now, in UTC (every wire timestamp is aware)."""
    return datetime.now(timezone.utc)


@dataclass
class SlotRecord:
    """The agent's view of one slot, reported as SlotStatus."""

    name: str
    desired_version: str | None
    active_version: str | None = None
    active_sha256: str | None = None
    phase: SlotPhase = SlotPhase.IDLE
    last_error: str | None = None
    failed_sha256: str | None = None
    retry: bool = False
    updated_at: datetime = field(default_factory=utcnow)
    engine: Resolved | None = None
    runtime: str | None = None
    retune_failed: bool = False

    def status(self) -> SlotStatus:
        engine = self.engine
        return SlotStatus(
            name=self.name,
            desired_version=self.desired_version,
            active_version=self.active_version,
            phase=self.phase,
            engine_key=engine.key if engine else None,
            runtime=self.runtime if engine else None,
            engine_source=engine.source if engine else None,
            tuning_tag=engine.manifest.tuning.label() if engine else None,
            tuning_matches=engine.tuning_matches if engine else None,
            last_error=self.last_error,
            updated_at=self.updated_at,
        )
