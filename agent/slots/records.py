"""The agent's record of its slots: one owner (the loop thread), one frozen view for the others.

:class:`SlotTable` holds a frozen :class:`SlotRecord` per model name and the desired document
they came from. Only the loop thread changes it; every change replaces the record whole and then
publishes a new :class:`SlotsView` (records, desired document, swaps so far) in one attribute
assignment. Other threads (the jobs thread, telemetry) read :attr:`SlotTable.view` and never see
a record half-changed or the records of one document beside another document.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from agent.engines.identity import tuning_matches
from agent.engines.resolver import Resolved
from agent.slots.plan import ActualSlot
from shared.engine_keys import TuningTag
from shared.messages import DesiredState, SlotPhase, SlotStatus


def utcnow() -> datetime:
    """Now, in UTC (every wire timestamp is aware)."""
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
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
    fallback_reason: str | None = None
    """Why the slot serves on ONNX Runtime on a TensorRT device (:mod:`agent.slots.fallback`)."""

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
            fallback_reason=self.fallback_reason if engine else None,
            updated_at=self.updated_at,
        )

    def actual(self) -> ActualSlot:
        """This slot as :func:`agent.slots.plan.plan` compares it."""
        return ActualSlot(
            self.name,
            self.active_version,
            self.active_sha256,
            self.failed_sha256,
            tuning_matches=self.engine.tuning_matches if self.engine else None,
            retune_failed=self.retune_failed,
        )


@dataclass(frozen=True)
class SlotsView:
    """What the loop thread publishes for the other threads, consistent at one instant."""

    slots: tuple[SlotRecord, ...] = ()
    """Every slot record, sorted by name."""
    desired: DesiredState | None = None
    swaps: int = 0
    """Engine swaps since the agent started (telemetry reports the increase)."""

    def get(self, name: str) -> SlotRecord | None:
        return next((r for r in self.slots if r.name == name), None)

    def engine_keys(self) -> dict[str, str]:
        """The active engine key of every slot that has one."""
        return {r.name: r.engine.key for r in self.slots if r.engine is not None}


class SlotTable:
    """The slot records and the desired document; changed by the loop thread only."""

    def __init__(self) -> None:
        self._records: dict[str, SlotRecord] = {}
        self._desired: DesiredState | None = None
        self._swaps = 0
        self.view = SlotsView()
        """The latest published view; replaced whole after every change (safe from any thread)."""

    @property
    def desired(self) -> DesiredState | None:
        return self._desired

    def __contains__(self, name: object) -> bool:
        return name in self._records

    def __getitem__(self, name: str) -> SlotRecord:
        return self._records[name]

    def records(self) -> list[SlotRecord]:
        """Every record, sorted by name."""
        return [self._records[n] for n in sorted(self._records)]

    def statuses(self) -> tuple[SlotStatus, ...]:
        return tuple(r.status() for r in self.records())

    def actual(self) -> dict[str, ActualSlot]:
        return {r.name: r.actual() for r in self._records.values()}

    def retrying(self) -> bool:
        """True when a slot failed transiently and waits to be tried again."""
        return any(r.retry for r in self._records.values())

    def all_serving(self) -> bool:
        return all(r.phase is SlotPhase.SERVING for r in self._records.values())

    def keep_desired(self, desired: DesiredState) -> None:
        """``desired`` replaces the kept document; the records stay as they are."""
        self._desired = desired
        self._publish()

    def accept(self, desired: DesiredState) -> None:
        """A new desired document: a record per slot, a permanent failure forgotten."""
        self._desired = desired
        for slot in desired.slots:
            record = self._records.get(slot.name)
            if record is None:
                self._records[slot.name] = SlotRecord(slot.name, slot.version)
            else:
                self._records[slot.name] = dataclasses.replace(
                    record, desired_version=slot.version, failed_sha256=None
                )
        self._publish()

    def put(self, record: SlotRecord) -> None:
        self._records[record.name] = record
        self._publish()

    def change(self, name: str, **fields: Any) -> SlotRecord:
        """Replace ``name``'s record with ``fields`` changed; the new record."""
        record = dataclasses.replace(self._records[name], **fields)
        self._records[name] = record
        self._publish()
        return record

    def set_phase(self, name: str, phase: SlotPhase) -> None:
        self.change(name, phase=phase, updated_at=utcnow())

    def remove(self, name: str) -> None:
        if self._records.pop(name, None) is not None:
            self._publish()

    def swapped(self) -> None:
        """Count one more engine swap."""
        self._swaps += 1
        self._publish()

    def mark_tuning(self, now: TuningTag) -> None:
        """The power mode changed: mark which active engines still match ``now``."""
        for name, record in self._records.items():
            engine = record.engine
            if engine is not None:
                matches = tuning_matches(engine.manifest.tuning, now)
                engine = dataclasses.replace(engine, tuning_matches=matches)
            self._records[name] = dataclasses.replace(record, retune_failed=False, engine=engine)
        self._publish()

    def _publish(self) -> None:
        self.view = SlotsView(tuple(self.records()), self._desired, self._swaps)
