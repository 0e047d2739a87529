"""Admission: may a new engine load next to the old one (warm), only instead of it (cold), or not?

Pure decision logic, no I/O: the measurements come from :mod:`agent.swap.headroom`, the resident
models from the serving core.

``need`` of one engine = engine bytes (weights, the plan size) + activation memory (TensorRT's
``device_memory_size_v2``; for ONNX Runtime an estimate) + I/O buffers + a margin. Two budgets
must both hold, because each catches what the other misses:

* **measured**: the new engine's need fits in what the OS says is free right now (``MemAvailable``
  on a Jetson or a CPU box, ``cudaMemGetInfo`` / NVML free on a dGPU), minus a reserve. Resident
  models already *occupy* their memory, so they are inside this number.
* **accounted**: the sum of the declared needs of *every* resident model (active and standby
  entries of every name, not only the one being swapped) plus the new one fits in the device's
  budget. Engines allocate lazily (activation memory on first run, ORT arenas on first large
  input), so a measurement taken while they are idle understates them; the sum does not.

On a Jetson a third check applies: NvMap wants physically contiguous blocks, so an engine whose
largest single allocation exceeds the largest free block (``lfb`` from ``/proc/buddyinfo``) fails
with ``error 12`` even when ``MemAvailable`` looks generous (docs/tensorrt.md#memory-on-a-jetson).

Decision, in order of preference: ``warm`` (load B next to A, validate, switch, drain A, free A);
``refit`` when only the weights changed and the engine is refittable (no second engine at all);
``cold`` when B fits once A is gone (pause intake, drain, unload A, load B, reload A if B
fails); ``refuse`` when B does not fit even alone (the message says how much is missing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

MiB = 1024 * 1024

Mode = Literal["warm", "refit", "cold", "refuse"]


@dataclass(frozen=True)
class Need:
    """What one engine takes while it serves; ``largest_block`` is its biggest single alloc."""

    engine_bytes: int
    activation_bytes: int = 0
    io_bytes: int = 0
    margin_bytes: int = 0

    @property
    def total(self) -> int:
        return self.engine_bytes + self.activation_bytes + self.io_bytes + self.margin_bytes

    @property
    def largest_block(self) -> int:
        return max(self.engine_bytes, self.activation_bytes, self.io_bytes)


def need_of(
    engine_bytes: int,
    activation_bytes: int = 0,
    io_bytes: int = 0,
    margin_fraction: float = 0.10,
    margin_min_bytes: int = 16 * MiB,
) -> Need:
    """A Need with the margin: ``margin_fraction`` of the rest, at least ``margin_min_bytes``."""
    base = engine_bytes + activation_bytes + io_bytes
    margin = max(int(base * margin_fraction), margin_min_bytes)
    return Need(engine_bytes, activation_bytes, io_bytes, margin)


@dataclass(frozen=True)
class Headroom:
    """Free memory as measured now; ``lfb_bytes`` only on a Jetson (largest contiguous block)."""

    available_bytes: int
    budget_bytes: int
    source: str
    lfb_bytes: int | None = None


@dataclass(frozen=True)
class Admission:
    """The decision and why, with the numbers that led to it (for events and telemetry)."""

    mode: Mode
    reason: str
    need_bytes: int
    available_bytes: int
    resident_bytes: int


def _mib(n: int) -> str:
    return f"{n / MiB:.0f} MiB"


def _fits(
    new: Need, resident: int, room: Headroom, freed_now: int, freed_resident: int
) -> str | None:
    """None when ``new`` fits; else why not. ``freed_*``: memory released before the load."""
    available = room.available_bytes + freed_now
    if new.total > available:
        return (
            f"needs {_mib(new.total)}, {_mib(available)} free ({room.source}); "
            f"short by {_mib(new.total - available)}"
        )
    accounted = resident - freed_resident + new.total
    if accounted > room.budget_bytes:
        return (
            f"resident models plus this one need {_mib(accounted)}, "
            f"over the budget of {_mib(room.budget_bytes)}"
        )
    if room.lfb_bytes is not None and new.largest_block > room.lfb_bytes + freed_now:
        return (
            f"its largest allocation ({_mib(new.largest_block)}) exceeds the largest free "
            f"block ({_mib(room.lfb_bytes)}): memory is fragmented"
        )
    return None


def decide(
    new: Need,
    old: Need | None,
    residents: Sequence[Need],
    room: Headroom,
    refittable: bool = False,
) -> Admission:
    """How to bring ``new`` in place of ``old`` given every resident model and the headroom.

    ``residents`` lists the needs of every loaded entry, *including* ``old``; ``refittable``
    says the runtime can refit ``old``'s engine in place with ``new``'s weights.
    """
    resident = sum(n.total for n in residents)

    def result(mode: Mode, reason: str) -> Admission:
        return Admission(mode, reason, new.total, room.available_bytes, resident)

    warm_problem = _fits(new, resident, room, 0, 0)
    if warm_problem is None:
        return result("warm", "the new engine fits next to every resident model")
    if old is not None and refittable:
        return result("refit", f"warm swap impossible ({warm_problem}); weights refitted in place")
    if old is not None:
        # Unloading old returns its bytes; on a Jetson it may also merge blocks, so count the
        # engine's largest block as a free block once it is gone.
        cold_problem = _fits(new, resident, room, old.total, old.total)
        if cold_problem is None:
            return result("cold", f"warm swap impossible ({warm_problem}); unloading first")
        return result(
            "refuse", f"does not fit even after unloading the old version: {cold_problem}"
        )
    return result("refuse", f"does not fit: {warm_problem}")
