"""The hot-swap of one model: admission → load → validate → journal → switch → drain → free.

Orchestrates :mod:`agent.serving.core` (slots, atomic switch, pause/drain),
:mod:`agent.swap.admission`
(warm / refit / cold / refuse), :mod:`agent.swap.validation` (reference outputs), and
:mod:`agent.swap.journal` (crash-safe pointers). Steps of a warm swap, with the names of the
checkpoints (:mod:`agent.checkpoints`):

``swap:begin`` (journal has ``pending``) → load standby → ``swap:loaded`` → validate →
``swap:validated`` → journal commit (active = new, rollback = old) → ``swap:committed`` →
promote (atomic) → ``swap:switched`` → drain old, close it (contexts before engine),
``malloc_trim`` → ``swap:drained``.

A cold swap pauses intake first, drains and unloads the old entry (``swap:unloaded``), loads
and validates the new one, and on failure reloads the old one before resuming; the waiting
requests are then served by whichever is active. A validation failure leaves the old entry
serving and raises :class:`ValidationFailed` naming every problem. Memory is snapshotted before
and after each swap; :class:`SwapStats` keeps them for ``/metrics`` and telemetry.

Admission goes through the agent's one :class:`~agent.swap.budget.MemoryBudget`, which the jobs
thread shares: each served entry holds its :class:`~agent.swap.budget.Reservation` until it is
closed, a swap's new engine holds one from admission on.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.checkpoints import reached
from agent.errors import AgentError, ModelLoadError
from agent.runtimes.base import LoadedModel
from agent.serving.core import ModelRegistry, ServedModel
from agent.swap.admission import Need
from agent.swap.budget import MemoryBudget, Reservation
from agent.swap.headroom import HeadroomProbe, MemorySnapshot
from agent.swap.journal import Pointer, SwapJournal
from agent.swap.validation import Reference, validate

log = logging.getLogger(__name__)


class ValidationFailed(ModelLoadError):
    """The new engine loaded but its outputs are wrong; the old one keeps serving."""


class AdmissionRefused(ModelLoadError):
    """The new engine does not fit in memory, not even in place of the old one."""


@dataclass
class SwapRecord:
    """One finished swap, for events, ``/metrics`` and the benchmark."""

    name: str
    version: str
    mode: str
    seconds: float
    before: MemorySnapshot
    after: MemorySnapshot
    reason: str


@dataclass
class SwapStats:
    """Swaps so far, per model, and the memory around the last one (thread-safe enough: the
    loop thread writes, HTTP threads read whole values)."""

    total: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    last: dict[str, SwapRecord] = field(default_factory=dict)

    def done(self, record: SwapRecord) -> None:
        self.total[record.name] = self.total.get(record.name, 0) + 1
        self.last[record.name] = record

    def fail(self, name: str) -> None:
        self.failed[name] = self.failed.get(name, 0) + 1


def malloc_trim() -> None:
    """Return freed heap to the OS (glibc keeps it; docs/tensorrt.md#memory-on-a-jetson)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


@dataclass(frozen=True)
class Candidate:
    """What to swap in: the new version, how to load it, and what to check it against."""

    name: str
    version: str
    sha256: str
    load: Callable[[], LoadedModel]
    need: Need
    pointer: Pointer
    reference: Reference | None = None
    precision: str = "fp32"
    max_queue: int = 64
    onnx_path: Path | None = None
    profile_opt: Mapping[str, tuple[int, ...]] | None = None
    """The delegate config's shape profile opt per input: the warm-up shapes."""


class HotSwapper:
    """Runs swaps on one registry; one swap at a time (the agent's loop thread).

    ``budget`` is the memory budget shared with the jobs (one of its own over ``probe`` when
    none is given).
    """

    def __init__(
        self,
        registry: ModelRegistry,
        journal: SwapJournal,
        probe: HeadroomProbe,
        state_dir: Path,
        drain_timeout_s: float = 30.0,
        budget: MemoryBudget | None = None,
    ) -> None:
        self.registry = registry
        self.journal = journal
        self.probe = probe
        self.budget = budget or MemoryBudget(probe)
        self.stats = SwapStats()
        self._state_dir = state_dir
        self._drain_timeout_s = drain_timeout_s
        self._lock = threading.Lock()
        self._held: dict[int, Reservation] = {}
        self._reloads: dict[int, Callable[[], LoadedModel]] = {}
        self._replacing = False

    def _step(self, step: str) -> None:
        if self._replacing:
            reached(step, self._state_dir)

    def _entry(self, c: Candidate, model: LoadedModel, reservation: Reservation) -> ServedModel:
        entry = ServedModel(
            c.name,
            c.version,
            c.sha256,
            model,
            c.max_queue,
            engine_key=c.pointer.engine_key,
            runtime=c.pointer.runtime,
            fallback=c.pointer.fallback_reason is not None,
        )
        self._held[id(entry)] = reservation
        reservation.loaded()
        self._reloads[id(entry)] = c.load
        return entry

    def _forget(self, entry: ServedModel) -> None:
        reservation = self._held.pop(id(entry), None)
        if reservation is not None:
            reservation.release()
        self._reloads.pop(id(entry), None)

    def _attached(self, reservation: Reservation) -> bool:
        return any(r is reservation for r in self._held.values())

    def swap(self, c: Candidate) -> SwapRecord:
        """Serve ``c`` in place of what serves ``c.name`` now; on failure the old one serves."""
        with self._lock:
            started = time.monotonic()
            before = self.probe.snapshot()
            old = self.registry.get(c.name)
            refittable = bool(getattr(old.model, "refittable", False)) if old is not None else False
            reservation = self.budget.reserve(
                c.need,
                f"{c.name} {c.version}",
                replacing=self._held.get(id(old)) if old is not None else None,
                refittable=refittable,
            )
            admission = reservation.admission
            self._replacing = old is not None
            if admission.mode == "refuse":
                self.stats.fail(c.name)
                raise AdmissionRefused(f"{c.name} {c.version}: {admission.reason}")
            self.journal.begin(c.name, c.pointer)
            self._step("swap:begin")
            try:
                if admission.mode == "refit" and self._refit(c):
                    mode = "refit"
                elif admission.mode in ("cold", "refit"):
                    self._cold(c, reservation)
                    mode = "cold"
                else:
                    self._warm(c, reservation)
                    mode = "warm"
            except AgentError:
                self.journal.abort(c.name)
                self.stats.fail(c.name)
                raise
            finally:
                if not self._attached(reservation):
                    reservation.release()
            # The young generations only: a full collection walks every object of the process
            # (FastAPI, pydantic, ...) holding the GIL, ~20 ms on a 2-core VM, and every
            # serving thread waits for it (bench/hot_swap.py: p99 during swaps 2.3-3.4x steady
            # with gc.collect(), 1.3x with this). The old engine goes by reference counting.
            gc.collect(1)
            malloc_trim()
            record = SwapRecord(
                c.name,
                c.version,
                mode,
                time.monotonic() - started,
                before,
                self.probe.snapshot(),
                admission.reason,
            )
            self.stats.done(record)
            self._step("swap:drained")
            return record

    def _load_and_validate(self, c: Candidate, reservation: Reservation) -> ServedModel:
        model = c.load()
        self._step("swap:loaded")
        try:
            report = validate(model, c.reference, c.precision, profile_opt=c.profile_opt)
        except AgentError as exc:
            model.close()
            raise ValidationFailed(f"warm-up inference failed: {exc}") from exc
        if not report.ok:
            model.close()
            raise ValidationFailed(
                f"validation against {report.checked} failed: " + "; ".join(report.problems)
            )
        self._step("swap:validated")
        return self._entry(c, model, reservation)

    def _switch(self, c: Candidate, entry: ServedModel) -> ServedModel | None:
        self.registry.stage(entry)
        self.journal.commit(c.name, c.pointer)
        self._step("swap:committed")
        old = self.registry.promote(c.name)
        self._step("swap:switched")
        return old

    def _retire(self, old: ServedModel | None) -> None:
        if old is None:
            return
        if not old.drain(self._drain_timeout_s):
            log.warning(
                "%s %s: requests still running after the drain timeout", old.name, old.version
            )
        old.close()
        self._forget(old)

    def _warm(self, c: Candidate, reservation: Reservation) -> None:
        entry = self._load_and_validate(c, reservation)
        self._retire(self._switch(c, entry))

    def _cold(self, c: Candidate, reservation: Reservation) -> None:
        self.registry.pause(c.name)
        try:
            old = self.registry.deactivate(c.name)
            if old is not None:
                old.drain(self._drain_timeout_s)
                old.close()
            self._step("swap:unloaded")
            try:
                entry = self._load_and_validate(c, reservation)
            except AgentError:
                if old is not None:
                    self._reload(old)
                raise
            self._switch(c, entry)
            if old is not None:
                self._forget(old)
        finally:
            self.registry.resume(c.name)

    def _reload(self, old: ServedModel) -> None:
        """Bring the previous version back after a failed cold swap."""
        load = self._reloads.pop(id(old), None)
        reservation = self._held.pop(id(old), None)
        if load is None:
            log.error("%s: cannot reload %s (no loader kept)", old.name, old.version)
            if reservation is not None:
                reservation.release()
            return
        try:
            model = load()
        except BaseException:
            if reservation is not None:
                reservation.release()
            raise
        entry = ServedModel(
            old.name,
            old.version,
            old.sha256,
            model,
            old.max_queue,
            engine_key=old.engine_key,
            runtime=old.runtime,
            fallback=old.fallback,
        )
        if reservation is not None:
            self._held[id(entry)] = reservation
        self._reloads[id(entry)] = load
        self.registry.stage(entry)
        self.registry.promote(old.name)

    def _refit(self, c: Candidate) -> bool:
        """Refit the active engine in place with ``c``'s weights; False to fall back to cold."""
        active = self.registry.get(c.name)
        refit: Any = getattr(active.model, "refit_from_onnx", None) if active else None
        if active is None or refit is None or c.onnx_path is None:
            return False
        self.registry.pause(c.name)
        try:
            if not active.wait_idle(self._drain_timeout_s):
                return False
            try:
                refit(c.onnx_path)
                report = validate(active.model, c.reference, c.precision, profile_opt=c.profile_opt)
            except AgentError as exc:
                log.warning("%s: refit failed (%s); swapping cold", c.name, exc)
                return False
            if not report.ok:
                log.warning("%s: refit output invalid (%s)", c.name, report.problems)
                return False
            self.journal.commit(c.name, c.pointer)
            active.version, active.sha256 = c.version, c.sha256
            return True
        finally:
            self.registry.resume(c.name)

    def unload(self, name: str) -> ServedModel | None:
        """Stop serving ``name`` (drained and closed) and forget its pointers."""
        with self._lock:
            entry = self.registry.remove(name)
            self.journal.remove(name)
            if entry is not None:
                self._retire(entry)
            return entry

    def restore(self, name: str, c: Candidate) -> None:
        """Serve ``c`` at start-up from the journal (no admission, no drain: nothing serves)."""
        with self._lock:
            reservation = self.budget.hold(c.need, f"{c.name} {c.version}")
            try:
                model = c.load()
            except BaseException:
                reservation.release()
                raise
            entry = self._entry(c, model, reservation)
            self.registry.stage(entry)
            self.registry.promote(name)
