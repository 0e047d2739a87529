"""What to do next: ``plan(desired, actual)`` → steps (pure; the daemon runs them).

A slot needs work when the model serving under its name is not the desired version and
artifact. Its steps are a download (only when the verified file is not on disk yet) and a load
(which includes validation and the swap). A slot whose artifact failed permanently is left alone
until a new desired document arrives; a name no longer desired is unloaded. A serving slot whose
engine was tuned under another power mode gets a retuning load (it keeps serving meanwhile),
unless retuning it already failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.messages import DesiredState, ModelSlot


@dataclass(frozen=True)
class ActualSlot:
    """What the agent has for one model name."""

    name: str
    active_version: str | None = None
    active_sha256: str | None = None
    failed_sha256: str | None = None
    """Artifact that failed permanently under the current desired document."""
    tuning_matches: bool | None = None
    """False while the active engine was tuned under another power mode than the current one."""
    retune_failed: bool = False
    """A retuning build failed for the current conditions; do not try again until they change."""


@dataclass(frozen=True)
class Actual:
    """The agent's side of the comparison."""

    slots: Mapping[str, ActualSlot] = field(default_factory=dict)
    downloaded: frozenset[str] = frozenset()
    """sha256 of every verified model file in the state directory."""


@dataclass(frozen=True)
class Download:
    """Fetch the slot's artifact into the state directory."""

    slot: ModelSlot


@dataclass(frozen=True)
class Load:
    """Load, warm up and swap in the slot's model (the old version serves until then).

    ``retune``: the model is current but its engine was tuned under other conditions; find or
    build one tuned under the current ones.
    """

    slot: ModelSlot
    retune: bool = False


@dataclass(frozen=True)
class Unload:
    """Stop serving ``name`` and forget its slot."""

    name: str


Step = Download | Load | Unload


def _is_current(slot: ModelSlot, actual: ActualSlot | None) -> bool:
    return (
        actual is not None
        and actual.active_version == slot.version
        and actual.active_sha256 == slot.artifact.sha256
    )


def plan(desired: DesiredState, actual: Actual) -> list[Step]:
    """Steps that move ``actual`` towards ``desired``: unloads first, then slots in order."""
    steps: list[Step] = [
        Unload(name) for name in sorted(actual.slots) if desired.slot(name) is None
    ]
    for slot in desired.slots:
        have = actual.slots.get(slot.name)
        if _is_current(slot, have):
            if have is not None and have.tuning_matches is False and not have.retune_failed:
                steps.append(Load(slot, retune=True))
            continue
        if have is not None and have.failed_sha256 == slot.artifact.sha256:
            continue
        if slot.artifact.sha256 not in actual.downloaded:
            steps.append(Download(slot))
        steps.append(Load(slot))
    return steps
