"""Devices and their slots: what each should serve (planned slots) and what it says it serves."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from shared.agent_releases import AgentUpdateStatus
from shared.delegate import DelegateConfig
from shared.messages import DeviceFacts, SlotStatus


@dataclass(frozen=True)
class PlannedSlot:
    """One slot of a device's desired state, as the controller stores it."""

    name: str
    version: str
    sha256: str
    size: int
    delegate: DelegateConfig
    model_version_id: int = 0
    config: str | None = None
    """The named delegate config ``delegate`` was resolved from (None = fleet-wide default)."""

    def same_as(self, other: PlannedSlot) -> bool:
        """True when serving ``other`` instead of this needs no work on the device."""
        return (self.name, self.version, self.sha256, self.delegate) == (
            other.name,
            other.version,
            other.sha256,
            other.delegate,
        )


@dataclass(frozen=True)
class SlotPlan:
    """The slots after a change, and whether they differ from before."""

    slots: tuple[PlannedSlot, ...]
    changed: bool
    rewrite: bool = False
    """Store ``slots`` although the device sees no change (e.g. only the config name moved)."""


@dataclass(frozen=True)
class DeviceRecord:
    """A device, with what it should serve and what it says it serves."""

    id: str
    labels: dict[str, str]
    online: bool
    last_seen: datetime | None
    desired_generation: int
    observed_generation: int | None
    serve_url: str | None
    slots: tuple[PlannedSlot, ...]
    reported: tuple[SlotStatus, ...] = ()
    """The slots the device last reported, typed (phases are :class:`SlotPhase`); a stored
    slot that no longer validates against the wire model is left out."""
    device_facts: DeviceFacts | None = None
    """The facts the device last reported (None before its first report, or when the stored
    facts no longer validate against the wire model: see :attr:`facts_unreadable`)."""
    facts_unreadable: str | None = None
    """Why the stored facts could not be read (None when they could, or none are stored). Such a
    device has no hardware class: class and JetPack selectors do not target it."""
    pinned_class: str | None = None
    """The hardware class it may upload engines for: its first report's, or one an operator
    accepted (None before its first report)."""
    agent_version: str | None = None
    """The agent release it last reported running (None before its first report)."""
    agent_update: AgentUpdateStatus | None = None
    """Its latest agent update as reported (None: none, or stored unreadable)."""


@dataclass(frozen=True)
class SlotChange:
    """The outcome of a deploy/undeploy on one device."""

    device_id: str
    generation: int
    changed: bool
    slots: tuple[PlannedSlot, ...]


@dataclass(frozen=True)
class SlotRef:
    """A deployed slot that resolves a named config: device, model, version id."""

    device_id: str
    model: str
    model_version_id: int
