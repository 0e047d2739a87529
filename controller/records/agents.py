"""Agent releases as stored, the order a device's desired document carries, and what a device
reports of its agent (for the agent rollouts' health gate)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.agent_releases import AgentUpdateStatus
from shared.messages import SlotStatus


@dataclass(frozen=True)
class AgentReleaseRecord:
    """One pushed agent release for one architecture."""

    id: int
    version: str
    arch: str
    format: str
    sha256: str
    size: int
    python: str | None
    jetpack: tuple[str, ...]
    """The JetPack lines it runs on (empty: any)."""
    details: dict[str, Any]
    signed_manifest: dict[str, Any] | None
    pushed_by: str
    created_at: datetime


@dataclass(frozen=True)
class AgentOrderRecord:
    """The release a device is ordered to run, and whether it may be older than its own."""

    release: AgentReleaseRecord
    allow_downgrade: bool = False
    confirm_within_s: int | None = None
    """How long the new release may take to confirm before the device switches back (None:
    the wire default)."""


@dataclass(frozen=True)
class AgentReport:
    """What a device last reported of its agent and slots."""

    device_id: str
    observed_generation: int | None
    agent_version: str | None
    update: AgentUpdateStatus | None
    slots: tuple[SlotStatus, ...] = field(default=())
