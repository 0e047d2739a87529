"""The update's persisted state: ``<state_dir>/agent-update.json``, replaced atomically.

One record: the order being carried out, its phase, the release that ran before it, why it
failed, when the phase began, and the slots that served when the agent restarted (the new
release confirms once they serve again). A ``kill -9`` at any instant leaves the previous
record or the next one (:func:`agent.durable_files.write_atomically`).
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.durable_files import write_atomically
from shared.agent_releases import AgentReleaseOrder, AgentUpdatePhase, AgentUpdateStatus

log = logging.getLogger(__name__)

JOURNAL_FILE: Final = "agent-update.json"


class UpdateJournal(BaseModel):
    """The content of the journal file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    order: AgentReleaseOrder
    phase: AgentUpdatePhase
    previous: str | None = None
    error: str | None = Field(default=None, max_length=2000)
    at: datetime
    serving_before: tuple[str, ...] = ()

    def status(self) -> AgentUpdateStatus:
        """What the device reports of it."""
        return AgentUpdateStatus(
            version=self.order.version,
            phase=self.phase,
            previous=self.previous,
            error=self.error,
            at=self.at,
        )

    def same_order(self, order: AgentReleaseOrder) -> bool:
        """True when ``order`` asks for the release this journal carries out."""
        return (
            order.version == self.order.version
            and order.artifact.sha256 == self.order.artifact.sha256
        )


def load(state_dir: Path) -> UpdateJournal | None:
    """The journal, or None (absent; unreadable ones are logged and ignored)."""
    path = state_dir / JOURNAL_FILE
    try:
        return UpdateJournal.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError) as exc:
        log.warning("ignoring the unreadable agent update journal %s: %s", path, exc)
        return None


def save(state_dir: Path, journal: UpdateJournal) -> None:
    """Replace the journal atomically."""
    write_atomically(state_dir / JOURNAL_FILE, journal.model_dump_json().encode())
