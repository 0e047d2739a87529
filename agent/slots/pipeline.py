"""The slot pipeline: the stages a slot goes through from a desired document to a served engine.

The daemon hands :meth:`SlotPipeline.run` the steps of :func:`agent.slots.plan.plan`. Each step
runs a fixed sequence of stages (:mod:`agent.slots.stages`), every one an object with the same
interface (:class:`Stage`): a ``name``, the ``phase`` the slot reports while it runs (None: the
slot keeps its phase) and ``run(slot_run)``. A stage owns what it needs (the downloader, the
resolver, the swapper...); what one stage finds for the next (the engine, the reference outputs)
travels in the :class:`SlotRun` of that step.

- ``Download`` step: verify → download (phase ``downloading``).
- ``Load`` step: verify → batching → resolve (``building`` only while it builds) → reference →
  swap (``validating``: load, validate, journal, switch, drain; then ``serving``).
- ``Load(retune=True)``: the same without the trust check; the current version keeps serving.
- ``Unload`` step: the record goes, the swapper unloads the model.

The pipeline owns what happens around the stages: phase changes (each one is reported at once),
events, and failures. A failed step leaves its slot ``failed`` with ``last_error`` (a transient
error is tried again by the daemon, a permanent one waits for a new artifact) and skips the
slot's later steps in the same pass. A stage that finds the state directory full (ENOSPC,
EDQUOT, EROFS from a download, a journal, an engine) fails its slot with the transient
:class:`StateDirError`, tried again like a network error (before, the error ended the
agent). A failed retune keeps the slot ``serving`` and marks it so
that it is not tried again under the same conditions.

Concurrency: the loop thread alone runs the pipeline and changes the :class:`SlotTable`.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from agent.engines.resolver import Resolved
from agent.errors import AgentError, PermanentError, StateDirError
from agent.serving.core import ServedModel
from agent.slots.fallback import fallback_delegate, fallback_reason
from agent.slots.plan import Download, Load, Step, Unload
from agent.slots.records import SlotRecord, SlotTable
from agent.swap.validation import Reference
from agent.trust.verifier import ArtifactRefused
from shared.engine_keys import TuningTag
from shared.messages import DesiredState, EventKind, ModelSlot, SlotPhase

log = logging.getLogger(__name__)

_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
"""``OSError`` numbers that mean the state directory cannot take the write now."""

Emit = Callable[..., None]
"""``emit(kind, slot, message, **data)``: the agent's event publisher."""


class SlotRun:
    """One step of one slot on its way through the stages, and what they found so far."""

    def __init__(
        self,
        pipeline: SlotPipeline,
        slot: ModelSlot,
        desired: DesiredState | None,
        retune: bool = False,
    ) -> None:
        self.slot = slot
        self.desired = desired
        """The document ``slot`` comes from; None for a retune (no trust check, no install)."""
        self.retune = retune
        self.engine: Resolved | None = None
        self.reference: Reference | None = None
        self.fallback_reason: str | None = None
        """Set when TensorRT failed and ONNX Runtime serves the version instead."""
        self.stage = ""
        """The name of the stage running (or that failed)."""
        self._pipeline = pipeline

    @property
    def record(self) -> SlotRecord:
        return self._pipeline.table[self.slot.name]

    def phase(self, phase: SlotPhase) -> None:
        """The slot reports ``phase`` now."""
        self._pipeline.set_phase(self.slot.name, phase)

    def update(self, **fields: Any) -> None:
        """Change the slot's record (reported with the next phase change)."""
        self._pipeline.table.change(self.slot.name, **fields)

    def emit(self, kind: EventKind, message: str, **data: Any) -> None:
        self._pipeline.emit(kind, self.slot.name, message, **data)

    def mark_tuning(self, now: TuningTag) -> None:
        """The power mode changed under this step: re-mark every slot's engine."""
        self._pipeline.table.mark_tuning(now)

    def swap_done(self) -> None:
        """One more engine swapped in (telemetry reports the count)."""
        self._pipeline.table.swapped()


class Stage(Protocol):
    """One stage of the pipeline."""

    name: str
    phase: SlotPhase | None
    """The phase the slot reports while this stage runs; None: it keeps the phase it had."""

    def run(self, run: SlotRun) -> None:
        """Do this stage's work for ``run``; an AgentError fails the step."""


class SwapStage(Stage, Protocol):
    """The last stage of a load, which can also take a model out of service."""

    def unload(self, name: str) -> ServedModel | None:
        """Stop serving ``name``; the entry that served it, if any."""


@dataclass(frozen=True)
class Stages:
    """The stage objects, by role; the order they run in is the pipeline's."""

    verify: Stage
    download: Stage
    batching: Stage
    resolve: Stage
    reference: Stage
    swap: SwapStage
    runtime: str = "onnxruntime"
    """The runtime ``resolve`` and ``swap`` serve with (the agent's)."""
    fallback: tuple[Stage, SwapStage] | None = None
    """ONNX Runtime's resolve and swap, where a slot TensorRT cannot serve falls back to
    (:mod:`agent.slots.fallback`); None on an ONNX Runtime device."""


class SlotPipeline:
    """Runs the steps of a plan through the stages, for the loop thread."""

    def __init__(
        self,
        table: SlotTable,
        stages: Stages,
        *,
        emit: Emit,
        report: Callable[[], None],
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.table = table
        self.stages = stages
        self.emit = emit
        self._report = report
        self._stopping = stopping
        self._download = (stages.verify, stages.download)
        self._load = (stages.verify, stages.batching, stages.resolve, stages.reference, stages.swap)

    def run(self, steps: Iterable[Step]) -> None:
        """Run ``steps`` in order until the agent stops; a slot's failure skips its later steps."""
        failed: set[str] = set()
        for step in steps:
            if self._stopping():
                break
            if isinstance(step, Unload):
                self._unload(step.name)
            elif step.slot.name not in failed and not self._run_step(step):
                failed.add(step.slot.name)

    def set_phase(self, name: str, phase: SlotPhase) -> None:
        """``name`` enters ``phase``; the agent reports its state at once."""
        self.table.set_phase(name, phase)
        self._report()

    def _run_step(self, step: Download | Load) -> bool:
        """Run the stages of one Download or Load step; False when the slot failed."""
        retune = not isinstance(step, Download) and step.retune
        desired = None if retune else self.table.desired
        run = SlotRun(self, step.slot, desired, retune=retune)
        stages = self._download if isinstance(step, Download) else self._load
        try:
            try:
                try:
                    self._run_stages(run, stages)
                except AgentError as exc:
                    reason = self._fallback_for(step, run, exc)
                    if reason is None:
                        raise
                    self._fall_back(run, reason)
            except OSError as exc:
                if exc.errno not in _NO_ROOM:
                    raise
                raise StateDirError(
                    f"cannot write the state directory ({exc.strerror or exc}): free space "
                    "there; retried"
                ) from exc
        except AgentError as exc:
            if retune:
                self._retune_failed(step.slot, exc)
                return True
            kind: EventKind = "download_failed" if isinstance(step, Download) else "error"
            if isinstance(exc, ArtifactRefused):
                kind = "artifact_refused"
            self._fail(step.slot, exc, kind)
            return False
        return True

    def _run_stages(self, run: SlotRun, stages: Iterable[Stage]) -> None:
        for stage in stages:
            run.stage = stage.name
            if stage.phase is not None:
                self.set_phase(run.slot.name, stage.phase)
            stage.run(run)

    def _fallback_for(self, step: Download | Load, run: SlotRun, exc: AgentError) -> str | None:
        """Why ``run``'s slot falls back to ONNX Runtime after ``exc`` (None: it fails)."""
        if isinstance(step, Download) or step.retune or self.stages.fallback is None:
            return None
        if run.stage not in ("resolve", "swap"):
            return None
        return fallback_reason(exc, run.slot.delegate, self.stages.runtime)

    def _fall_back(self, run: SlotRun, reason: str) -> None:
        """Serve ``run``'s version on ONNX Runtime; its failures fail the slot as usual."""
        assert self.stages.fallback is not None
        slot = run.slot
        log.warning(
            "slot %s version %s: TensorRT cannot serve it (%s); serving it on ONNX Runtime",
            slot.name,
            slot.version,
            reason,
        )
        self.emit(
            "fallback",
            slot.name,
            f"{slot.name} {slot.version} falls back to ONNX Runtime: {reason}",
            version=slot.version,
            reason=reason,
        )
        run.fallback_reason, run.engine = reason, None
        run.slot = slot.model_copy(update={"delegate": fallback_delegate(slot.delegate)})
        resolve, swap = self.stages.fallback
        self._run_stages(run, (resolve, self.stages.reference, swap))

    def _unload(self, name: str) -> None:
        self.table.remove(name)
        entry = self.stages.swap.unload(name)
        if entry is not None:
            self.emit("swap", name, f"unloaded {name} {entry.version}", to_version=None)
        self._report()

    def _fail(self, slot: ModelSlot, exc: AgentError, kind: EventKind) -> None:
        if isinstance(exc, PermanentError):
            self.table.change(
                slot.name, last_error=str(exc), failed_sha256=slot.artifact.sha256, retry=False
            )
        else:
            self.table.change(slot.name, last_error=str(exc), retry=True)
        log.warning("slot %s version %s failed: %s", slot.name, slot.version, exc)
        self.set_phase(slot.name, SlotPhase.FAILED)
        reason = {"reason": exc.reason} if isinstance(exc, ArtifactRefused) else {}
        self.emit(kind, slot.name, str(exc), version=slot.version, **reason)

    def _retune_failed(self, slot: ModelSlot, exc: AgentError) -> None:
        """Retuning failed: the engine it had keeps serving; not retried until conditions change."""
        error = f"retuning for the current power mode failed: {exc}"
        self.table.change(slot.name, retune_failed=True, phase=SlotPhase.SERVING, last_error=error)
        self._report()
        self.emit("error", slot.name, error)
