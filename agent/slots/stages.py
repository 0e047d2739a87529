"""The stages of the slot pipeline (:mod:`agent.slots.pipeline`), one object each.

Every stage owns the collaborators it needs and passes what it found to the next stage through
the step's :class:`~agent.slots.pipeline.SlotRun`:

- :class:`VerifyModel`: the artifact may be installed (signature, rollback rule).
- :class:`DownloadModel`: the verified model file in the state directory (``downloading``).
- :class:`ConfigureBatching`: the slot's batching policy, before anything loads.
- :class:`ResolveEngine`: the engine for this device: cache, fleet store, or a build in a child
  process (``building`` only then); applies the slot's power mode first. A build that calibrates
  INT8 from the version's sample inputs gets the reference NPZ first
  (:mod:`agent.engines.sample_calibration`).
- :class:`FetchReference`: the slot's reference outputs, when it has them.
- :class:`SwapIn`: the hot-swap (``validating``): load, validate against the reference, journal,
  switch, drain; then the slot serves and its engine stays pinned in the cache.

Loading and validating are one stage with the switch because the swap protocol
(:mod:`agent.swap.hotswap`) does them under one lock, between crash-safe journal writes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from agent.engines.cache import EngineCache
from agent.engines.identity import IdentityError, identify, tuning_tag
from agent.engines.resolver import EngineResolver
from agent.engines.sample_calibration import calibration_reference, check_samples
from agent.errors import ModelLoadError
from agent.hardware.runtime_kinds import runtime_kind
from agent.link.downloader import Downloader, model_path
from agent.runtimes.base import LoadedModel
from agent.serving.batching import Batcher
from agent.serving.core import ServedModel
from agent.slots.pipeline import SlotRun
from agent.swap.admission import need_of
from agent.swap.hotswap import Candidate, HotSwapper
from agent.swap.journal import Pointer
from agent.swap.validation import BadReference, parse_reference
from agent.trust.verifier import ArtifactVerifier
from shared.facts import DeviceFacts
from shared.messages import ArtifactRef, ModelSlot, SlotPhase
from shared.reference_layout import ReferenceLayoutError


class SlotLoader(Protocol):
    """How to load an engine file for a slot (:func:`agent.swap.loaders.slot_loader`, bound)."""

    def __call__(
        self, path: Path, slot: ModelSlot, *, engine_key: str | None = None
    ) -> Callable[[], LoadedModel]: ...


class PowerModes(Protocol):
    """The device's facts and its power mode (:class:`agent.jobs.power_facts.PowerTuning`)."""

    @property
    def facts(self) -> DeviceFacts: ...

    def apply(self, slot: ModelSlot) -> bool:
        """Switch to ``slot``'s power mode if it asks for one; True when the mode changed."""
        ...


class VerifyModel:
    """Refuses an artifact the fleet's keys do not allow (skipped for a retune)."""

    name = "verify"
    phase: SlotPhase | None = None

    def __init__(self, verifier: ArtifactVerifier) -> None:
        self._verifier = verifier

    def run(self, run: SlotRun) -> None:
        if run.desired is not None:
            self._verifier.check_model(run.slot, run.desired)


class DownloadModel:
    """Fetches the slot's model into the state directory (verified on arrival)."""

    name = "download"
    phase: SlotPhase | None = SlotPhase.DOWNLOADING

    def __init__(self, downloader: Downloader, on_progress: Callable[[], object]) -> None:
        self._downloader = downloader
        self._on_progress = on_progress

    def run(self, run: SlotRun) -> None:
        slot = run.slot
        run.emit("download_started", f"downloading {slot.name} {slot.version}")
        path = self._downloader.fetch(slot.artifact, on_progress=self._on_progress)
        run.emit("download_done", f"downloaded {path.name}", size=slot.artifact.size)


class ConfigureBatching:
    """Applies the slot's dynamic-batching settings to the serving side."""

    name = "batching"
    phase: SlotPhase | None = None

    def __init__(self, batcher: Batcher) -> None:
        self._batcher = batcher

    def run(self, run: SlotRun) -> None:
        serving = run.slot.serving
        self._batcher.configure(run.slot.name, serving.max_batch_size, serving.max_queue_delay_ms)


class ResolveEngine:
    """Finds or builds the slot's engine on this device (``run.engine``)."""

    name = "resolve"
    phase: SlotPhase | None = None
    """``building`` is reported by the resolver, only when it builds."""

    def __init__(
        self,
        resolver: EngineResolver,
        power: PowerModes,
        runtime: str,
        state_dir: Path,
        reference: FetchReference | None = None,
    ) -> None:
        self._resolver = resolver
        self._power = power
        self._runtime = runtime
        self._state_dir = state_dir
        self._reference = reference
        """Fetches the sample inputs an INT8 build calibrates from (None: never calibrates)."""

    def run(self, run: SlotRun) -> None:
        slot = run.slot
        if self._power.apply(slot):
            run.mark_tuning(tuning_tag(self._power.facts))
        fetcher = self._reference
        calibrating = calibration_reference(self._runtime, slot) if fetcher else None
        inputs = fetcher.samples(slot.version, calibrating) if fetcher and calibrating else None
        try:
            identity = identify(
                self._runtime,
                self._power.facts,
                slot.artifact.sha256,
                slot.delegate,
                calibrating.sha256 if calibrating else None,  # calibrated from it: in the key
            )
        except IdentityError as exc:
            raise ModelLoadError(f"cannot name the engine: {exc}") from exc
        run.engine = self._resolver.resolve(
            slot.name,
            model_path(self._state_dir, slot.artifact.sha256),
            identity,
            slot.delegate,
            on_building=lambda: run.phase(SlotPhase.BUILDING),
            retune=run.retune,
            calibration_inputs=inputs,
        )


class FetchReference:
    """Downloads and parses the slot's reference outputs (``run.reference``), if it has any."""

    name = "reference"
    phase: SlotPhase | None = None

    def __init__(self, downloader: Downloader, on_progress: Callable[[], object]) -> None:
        self._downloader = downloader
        self._on_progress = on_progress

    def run(self, run: SlotRun) -> None:
        slot = run.slot
        if slot.reference is None:
            run.reference = None
            return
        path = self._downloader.fetch(slot.reference, on_progress=self._on_progress)
        try:
            run.reference = parse_reference(path.read_bytes())
        except BadReference as exc:
            raise ModelLoadError(f"reference outputs of {slot.version}: {exc}") from exc

    def samples(self, version: str, reference: ArtifactRef) -> Path:
        """The reference NPZ whose inputs INT8 calibrates from, fetched and checked from its
        headers (ModelLoadError when it cannot calibrate); the validation reads it again."""
        path = self._downloader.fetch(reference, on_progress=self._on_progress)
        try:
            check_samples(path)
        except ReferenceLayoutError as exc:
            raise ModelLoadError(
                f"sample inputs of {version} (its reference) cannot calibrate INT8: {exc}"
            ) from exc
        return path


class SwapIn:
    """Swaps the resolved engine in; the slot then serves it and reports where it came from."""

    name = "swap"
    phase: SlotPhase | None = SlotPhase.VALIDATING

    def __init__(
        self,
        swapper: HotSwapper,
        engines: EngineCache,
        verifier: ArtifactVerifier,
        runtime: str,
        state_dir: Path,
        load_for: SlotLoader,
    ) -> None:
        self._swapper = swapper
        self._engines = engines
        self._verifier = verifier
        self._runtime = runtime
        self._state_dir = state_dir
        self._load_for = load_for

    def run(self, run: SlotRun) -> None:
        slot, engine = run.slot, run.engine
        if engine is None:
            raise ModelLoadError(f"{slot.name}: no engine was resolved before the swap")
        size = engine.path.stat().st_size
        candidate = Candidate(
            name=slot.name,
            version=slot.version,
            sha256=slot.artifact.sha256,
            load=self._load_for(engine.path, slot, engine_key=engine.key),
            need=need_of(size, runtime_kind(self._runtime).activation_estimate(size)),
            pointer=Pointer(
                slot.version,
                slot.artifact.sha256,
                str(engine.path),
                engine.key,
                self._runtime,
                run.fallback_reason,
            ),
            reference=run.reference,
            precision=str(slot.delegate.precision),
            max_queue=slot.serving.max_queue,
            onnx_path=model_path(self._state_dir, slot.artifact.sha256),
            profile_opt={p.input: p.opt for p in slot.delegate.shapes},
        )
        old = self._swapper.registry.get(slot.name)
        swapped = self._swapper.swap(candidate)
        if run.desired is not None:
            self._verifier.installed(slot, run.desired.generation)
        run.swap_done()
        previous = run.record.engine.key if run.record.engine else None
        self._engines.pin(slot.name, active=engine.key, rollback=previous)
        run.update(
            engine=engine,
            runtime=self._runtime,
            active_version=slot.version,
            active_sha256=slot.artifact.sha256,
            last_error=None,
            retry=False,
            fallback_reason=run.fallback_reason,
        )
        run.phase(SlotPhase.SERVING)
        run.emit(
            "swap",
            f"{slot.name} now serves {slot.version} ({swapped.mode} swap)",
            from_version=old.version if old else None,
            to_version=slot.version,
            engine_key=engine.key,
            engine_source=engine.source,
            swap_mode=swapped.mode,
            swap_seconds=round(swapped.seconds, 4),
            memory_before=swapped.before.as_dict(),
            memory_after=swapped.after.as_dict(),
            validated=candidate.reference is not None,
        )

    def unload(self, name: str) -> ServedModel | None:
        self._engines.unpin(name)
        return self._swapper.unload(name)
