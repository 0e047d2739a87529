"""The agent's loop: take desired documents, reconcile, serve, report state and telemetry.

One thread owns every slot record and runs every step, so no step races another. The MQTT
thread only drops desired documents into an inbox; the HTTP threads only read the registry and
the readiness flag; a telemetry thread (:mod:`agent.telemetry.loop`) only samples the collectors,
so a long engine build on the loop thread never stops telemetry. Telemetry and events leave
through the disk spool (:mod:`agent.link.outbox`), so a broker outage delays them but loses none;
systemd hears READY, STATUS and watchdog pings through :mod:`agent.service.lifecycle`. A slot moves
downloading → building (only when its engine is neither cached nor in the fleet store) →
validating → serving; a failure leaves it ``failed`` with ``last_error`` while the version it had
(if any) keeps serving. Each slot reports its engine: key, runtime, where it came from, its tuning
tag and whether that tag matches the device's current power mode; power-mode handling lives in
:mod:`agent.jobs.power_facts`.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import queue
import signal
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from agent.engines.cache import EngineCache
from agent.engines.identity import IdentityError, identify, tuning_matches, tuning_tag
from agent.engines.resolver import EngineResolver, Resolved
from agent.engines.store_client import StoreClient
from agent.errors import AgentError, ModelLoadError, PermanentError
from agent.hardware.facts import probe
from agent.jobs.power_facts import PowerTuning
from agent.jobs.runner import JobHost, JobRunner
from agent.link.downloader import Downloader, controller_tls, model_path
from agent.link.mqtt_link import MqttLink
from agent.link.outbox import Outbox
from agent.runtimes.base import LoadedModel, ModelLoader
from agent.service.lifecycle import ServiceNotifications, phase_text
from agent.serving.app import ServingServer, create_app
from agent.serving.batching import Batcher
from agent.serving.core import ModelRegistry
from agent.serving.prometheus import PromMetrics
from agent.serving.shared_memory import SharedMemoryRegions
from agent.settings import AgentSettings
from agent.slots.plan import Actual, ActualSlot, Download, Step, Unload, plan
from agent.slots.records import SlotRecord, utcnow
from agent.slots.state_store import (
    DESIRED_FILE,
    downloaded,
    ensure_layout,
    load_desired,
    save_desired,
)
from agent.swap.admission import need_of
from agent.swap.headroom import HeadroomProbe, Kind
from agent.swap.hotswap import Candidate, HotSwapper
from agent.swap.journal import Pointer, SwapJournal
from agent.swap.loaders import loader_for, slot_loader
from agent.swap.validation import Reference, ReferenceError, parse_reference
from agent.telemetry.collectors.health import default_sampler
from agent.telemetry.collectors.inference import HistogramMetrics, InferenceCollector
from agent.telemetry.loop import TelemetryLoop
from agent.trust.store import TrustStore
from agent.trust.verifier import ArtifactRefused, ArtifactVerifier
from shared.messages import (
    DesiredState,
    DeviceFacts,
    Event,
    EventKind,
    ModelSlot,
    ReportedState,
    SlotPhase,
)
from shared.topics import Channel, Topics

log = logging.getLogger(__name__)

RETRY_S = 15.0
"""Delay before a slot that failed transiently (network, 5xx) is tried again."""

TICK_S = 0.25
"""Longest the loop waits before it looks at the stop flag again."""


def agent_version() -> str:
    """The installed jetfleet distribution's version."""
    try:
        return importlib.metadata.version("jetfleet")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


class AgentDaemon:
    """One gateway agent: ``run()`` blocks until ``request_stop()``."""

    def __init__(
        self,
        settings: AgentSettings,
        facts: DeviceFacts,
        loader: ModelLoader | None = None,
        runtime: str = "onnxruntime",
    ) -> None:
        self._settings = settings
        self._device_id = settings.require_device_id()
        self._runtime = runtime
        self._loader = loader or loader_for(runtime, settings.swap_mode)
        self._custom_loader = loader is not None
        self._tuning = PowerTuning(facts, self._event)
        self._state_dir = settings.state_dir
        self._version = agent_version()
        self._boot = uuid.uuid4().hex
        self._event_seq = 0
        self._event_lock = threading.Lock()
        self._inbox: queue.Queue[DesiredState] = queue.Queue()
        self._stopping = False
        self._ready = False
        self._desired: DesiredState | None = None
        self._observed = -1
        self._heard_broker = False
        self._records: dict[str, SlotRecord] = {}
        self._engine_keys: dict[str, str] = {}
        self._swaps = 0
        self._next_retry: float | None = None
        self._last_reported: ReportedState | None = None
        self._outbox: Outbox | None = None
        self.service = ServiceNotifications()
        self.registry = ModelRegistry()
        self.metrics = HistogramMetrics()
        kind: Kind = "jetson" if facts.jetson else "dgpu" if runtime == "tensorrt" else "cpu"
        self.swapper = HotSwapper(
            self.registry,
            SwapJournal(self._state_dir),
            HeadroomProbe(kind, budget_fraction=settings.memory_budget_fraction),
            self._state_dir,
            drain_timeout_s=settings.swap_drain_timeout_s,
        )
        self.prometheus = PromMetrics(self.registry, self.swapper.stats)
        self._sampler = default_sampler(
            self._state_dir,
            InferenceCollector(
                self.metrics,
                active=self.registry.versions,
                engine_keys=lambda: self._engine_keys,
                queue_depth=self.registry.inflight,
                swaps_total=lambda: self._swaps,
            ),
            mapping=dict.fromkeys(settings.disabled_collectors, False),
        )
        host, port = settings.serve
        self._serve_host = host
        self.batcher = Batcher()
        self.shared_memory = SharedMemoryRegions() if settings.serve_shared_memory else None
        app = create_app(
            self.registry,
            self.metrics,
            lambda: self._ready,
            self._version,
            self.prometheus,
            batcher=self.batcher,
            shared_memory=self.shared_memory,
        )
        self._server = ServingServer(app, host, port)
        token = settings.api_token.get_secret_value() if settings.api_token else None
        verify = controller_tls(settings.controller_ca_file)
        self._downloader = Downloader(
            self._state_dir, base_url=settings.controller_url, token=token, verify=verify
        )
        self._store = (
            StoreClient(settings.controller_url, token=token, verify=verify)
            if settings.controller_url
            else None
        )
        self.verifier = ArtifactVerifier(
            TrustStore.open(self._state_dir), self._device_id, emit=self._event
        )
        self.jobs = JobRunner(
            JobHost(
                runtime,
                self._state_dir,
                records=lambda: self._records,
                desired=lambda: self._desired,
                facts=lambda: self._tuning.facts,
                swapper=self.swapper,
                fetch=self._downloader.fetch,
                build_timeout_s=settings.build_timeout_s,
                verify_model=self.verifier.check_job_artifact,
            ),
            self._event,
        )
        self.engines = EngineCache(
            self._state_dir / "engines",
            settings.engine_cache_mib * 1024 * 1024,
            on_corrupt=lambda key, reason: self._event("error", None, reason, engine_key=key),
        )
        self._resolver = EngineResolver(
            self.engines,
            self._store,
            self._device_id,
            build_timeout_s=settings.build_timeout_s,
            lease_ttl_s=settings.build_lease_s,
            emit=self._event,
            dla_cores=facts.jetson.dla_cores if facts.jetson else None,
            cancelled=self._supervising,
            verify=self.verifier.check_engine,
        )
        broker_host, broker_port = settings.broker
        self._link = MqttLink(
            broker_host,
            broker_port,
            self._device_id,
            Topics(settings.topic_prefix),
            on_desired=self._inbox.put,
            on_connected=self._on_connected,
            auth=settings.mqtt_auth,
            tls=settings.broker_tls,
        )

    @property
    def serve_url(self) -> str:
        """The KServe v2 base URL (the real port once serving started)."""
        return f"http://{self._serve_host}:{self._server.port}"

    def request_stop(self) -> None:
        """Ask ``run()`` to return; safe from a signal handler (sets one attribute)."""
        self._stopping = True

    def run(self) -> None:
        """Serve until ``request_stop()``; then publish offline, stop serving, release models."""
        telemetry: TelemetryLoop | None = None
        try:
            ensure_layout(self._state_dir)
            self._outbox = Outbox.open(
                self._state_dir,
                self._settings.spool_max_mib * 1024 * 1024,
                self._settings.spool_max_age_s,
                self._link.publish_spooled,
            )
            self.jobs.start()
            self._restore()
            self._server.start()
            self.service.serving()
            log.info("serving KServe v2 on %s", self.serve_url)
            kept = load_desired(self._state_dir)
            if kept is not None and kept.device_id == self._device_id:
                log.info(
                    "serving kept desired generation %d before the broker answers", kept.generation
                )
                self._accept(kept, from_broker=False)
            self._last_reported = self.reported()
            self._link.start()
            self._outbox.start()
            telemetry = TelemetryLoop(
                self._device_id,
                self._boot,
                self._sampler,
                self._outbox,
                self._settings.telemetry_interval_s,
            )
            telemetry.start()
            self._loop()
            self.service.stopping("stopping: finishing requests, publishing offline status")
        finally:
            if telemetry is not None:
                telemetry.stop()
            self.jobs.stop()
            if self._outbox is not None:
                self._outbox.close()
            self.service.stop()
            self._link.stop()
            self._server.stop()
            if self.shared_memory is not None:
                self.shared_memory.close()
            self.registry.close_all()
            self._sampler.close()
            self._downloader.close()
            if self._store is not None:
                self._store.close()
            log.info("agent %s stopped", self._device_id)

    # --- the loop -----------------------------------------------------------------------------

    def _on_connected(self) -> None:
        """Runs on the MQTT thread: republish the last reported state, resume forwarding."""
        if self._last_reported is not None:
            self._link.publish_reported(self._last_reported)
        if self._outbox is not None:
            self._outbox.wake()

    def _supervising(self) -> bool:
        """Polled by downloads and builds on the loop thread: proves it alive; True to cancel."""
        self.service.heartbeat.beat()
        return self._stopping

    def _tick(self) -> None:
        slots = [self._records[n].status() for n in sorted(self._records)]
        status = phase_text(slots, self._desired is not None, self._link.connected)
        self.service.tick(self._link.reported_acked, self._ready, status)

    def _loop(self) -> None:
        while not self._stopping:
            self._tick()
            wait = TICK_S
            if self._next_retry is not None:
                wait = min(wait, max(0.0, self._next_retry - time.monotonic()))
            try:
                desired = self._inbox.get(timeout=wait)
            except queue.Empty:
                desired = None
            if desired is not None:
                self._accept(desired, from_broker=True)
            if self._next_retry is not None and time.monotonic() >= self._next_retry:
                self._reconcile()
            if self._tuning.due() and self._tuning.refresh():
                self._retag()

    def _accept(self, desired: DesiredState, from_broker: bool) -> None:
        source = "broker" if from_broker else DESIRED_FILE
        if self.verifier.check_document(desired, self._observed, source) is not None:
            return
        first_from_broker = from_broker and not self._heard_broker
        self._heard_broker = self._heard_broker or from_broker
        if desired.generation <= self._observed and not first_from_broker:
            if from_broker and desired.generation == self._observed and self.verifier.trust.pinned:
                # A verified republish (new signatures, a key rotation): keep it, change nothing.
                save_desired(self._state_dir, desired)
                self._desired = desired
                self.verifier.follow_rotation(desired)
            log.debug("desired generation %d already observed", desired.generation)
            return
        if from_broker:
            save_desired(self._state_dir, desired)
        self._desired = desired
        self._observed = desired.generation
        self.verifier.follow_rotation(desired)
        self.jobs.submit(desired.jobs)
        for slot in desired.slots:
            record = self._records.get(slot.name)
            if record is None:
                self._records[slot.name] = SlotRecord(slot.name, slot.version)
            else:
                record.desired_version = slot.version
                record.failed_sha256 = None
        log.info("desired generation %d: %d slot(s)", desired.generation, len(desired.slots))
        self._reconcile()

    def _actual(self) -> Actual:
        return Actual(
            slots={
                r.name: ActualSlot(
                    r.name,
                    r.active_version,
                    r.active_sha256,
                    r.failed_sha256,
                    tuning_matches=r.engine.tuning_matches if r.engine else None,
                    retune_failed=r.retune_failed,
                )
                for r in self._records.values()
            },
            downloaded=downloaded(self._state_dir),
        )

    def _reconcile(self) -> None:
        self._next_retry = None
        if self._desired is None:
            return
        failed: set[str] = set()
        for step in plan(self._desired, self._actual()):
            if self._stopping:
                break
            self._run_step(step, failed)
        if any(r.retry for r in self._records.values()):
            self._next_retry = time.monotonic() + RETRY_S
        self._update()

    def _run_step(self, step: Step, failed: set[str]) -> None:
        if isinstance(step, Unload):
            self._unload(step.name)
            return
        if step.slot.name in failed:
            return
        try:
            if isinstance(step, Download):
                self._download(step.slot)
            elif step.retune:
                self._retune(step.slot)
            else:
                self._load(step.slot)
        except AgentError as exc:
            failed.add(step.slot.name)
            kind: EventKind = "download_failed" if isinstance(step, Download) else "error"
            if isinstance(exc, ArtifactRefused):
                kind = "artifact_refused"
            self._fail(step.slot, exc, kind)

    # --- steps --------------------------------------------------------------------------------

    def _unload(self, name: str) -> None:
        self._records.pop(name, None)
        self._engine_keys = {k: v for k, v in self._engine_keys.items() if k != name}
        self.engines.unpin(name)
        entry = self.swapper.unload(name)
        if entry is not None:
            self._event("swap", name, f"unloaded {name} {entry.version}", to_version=None)
        self._update()

    def _download(self, slot: ModelSlot) -> None:
        if self._desired is not None:
            self.verifier.check_model(slot, self._desired)
        self._set_phase(slot, SlotPhase.DOWNLOADING)
        self._event("download_started", slot.name, f"downloading {slot.name} {slot.version}")
        path = self._downloader.fetch(slot.artifact, on_progress=self._supervising)
        self._event("download_done", slot.name, f"downloaded {path.name}", size=slot.artifact.size)

    # --- power mode and tuning ------------------------------------------------------------

    def _mark_tuning(self) -> None:
        """The power mode changed: mark which active engines still match it."""
        now = tuning_tag(self._tuning.facts)
        for record in self._records.values():
            record.retune_failed = False
            if record.engine is not None:
                matches = tuning_matches(record.engine.manifest.tuning, now)
                record.engine = dataclasses.replace(record.engine, tuning_matches=matches)

    def _retag(self) -> None:
        """The power mode changed by itself: report it, then retune what no longer matches."""
        self._mark_tuning()
        self._update()
        self._reconcile()

    def _retune(self, slot: ModelSlot) -> None:
        """Find or build an engine tuned under the current conditions; keep serving meanwhile."""
        record = self._records[slot.name]
        try:
            self._load(slot, retune=True)
        except AgentError as exc:
            record.retune_failed = True
            record.phase = SlotPhase.SERVING
            record.last_error = f"retuning for the current power mode failed: {exc}"
            self._update()
            self._event("error", slot.name, record.last_error)

    def _resolve(self, slot: ModelSlot, retune: bool = False) -> Resolved:
        """The engine of ``slot`` on this device (cache, store, or a build in a child)."""
        if self._tuning.apply(slot):
            self._mark_tuning()
        try:
            identity = identify(
                self._runtime, self._tuning.facts, slot.artifact.sha256, slot.delegate
            )
        except IdentityError as exc:
            raise ModelLoadError(f"cannot name the engine: {exc}") from exc
        return self._resolver.resolve(
            slot.name,
            model_path(self._state_dir, slot.artifact.sha256),
            identity,
            slot.delegate,
            on_building=lambda: self._set_phase(slot, SlotPhase.BUILDING),
            retune=retune,
        )

    def _model_loader(self, path: Path, slot: ModelSlot) -> Callable[[], LoadedModel]:
        return slot_loader(
            path,
            slot,
            runtime=self._runtime,
            swap_mode=self._settings.swap_mode,
            fallback=self._loader,
            custom=self._custom_loader,
        )

    def _reference(self, slot: ModelSlot) -> Reference | None:
        """The slot's reference outputs (downloaded and verified), or None when it has none."""
        if slot.reference is None:
            return None
        path = self._downloader.fetch(slot.reference, on_progress=self._supervising)
        try:
            return parse_reference(path.read_bytes())
        except ReferenceError as exc:
            raise ModelLoadError(f"reference outputs of {slot.version}: {exc}") from exc

    def _load(self, slot: ModelSlot, retune: bool = False) -> None:
        desired = None if retune else self._desired
        if desired is not None:
            self.verifier.check_model(slot, desired)
        self.batcher.configure(
            slot.name, slot.serving.max_batch_size, slot.serving.max_queue_delay_ms
        )
        engine = self._resolve(slot, retune=retune)
        reference = self._reference(slot)
        self._set_phase(slot, SlotPhase.VALIDATING)
        size = engine.path.stat().st_size
        candidate = Candidate(
            name=slot.name,
            version=slot.version,
            sha256=slot.artifact.sha256,
            load=self._model_loader(engine.path, slot),
            need=need_of(size, size if self._runtime == "onnxruntime" else 0),
            pointer=Pointer(
                slot.version, slot.artifact.sha256, str(engine.path), engine.key, self._runtime
            ),
            reference=reference,
            precision=str(slot.delegate.precision),
            max_queue=slot.serving.max_queue,
            onnx_path=model_path(self._state_dir, slot.artifact.sha256),
        )
        old = self.registry.get(slot.name)
        swapped = self.swapper.swap(candidate)
        if desired is not None:
            self.verifier.installed(slot, desired.generation)
        self._engine_keys = {**self._engine_keys, slot.name: engine.key}
        self._swaps += 1
        record = self._records[slot.name]
        previous = record.engine.key if record.engine else None
        self.engines.pin(slot.name, active=engine.key, rollback=previous)
        record.engine = engine
        record.runtime = self._runtime
        record.active_version = slot.version
        record.active_sha256 = slot.artifact.sha256
        record.last_error = None
        record.retry = False
        self._set_phase(slot, SlotPhase.SERVING)
        self._event(
            "swap",
            slot.name,
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

    def _restore(self) -> None:
        """Serve what the swap journal says each model served before a restart or crash.

        ``active`` first, ``rollback`` when it no longer loads; a ``pending`` swap never
        reached its switch and is ignored. Reconcile then moves on from there.
        """
        for name, pointers in self.swapper.journal.models().items():
            for pointer in (pointers.active, pointers.rollback):
                if pointer is None or pointer.runtime != self._runtime:
                    continue
                path = Path(pointer.engine_path)
                if not path.is_file():
                    continue
                loader = self._loader
                candidate = Candidate(
                    name=name,
                    version=pointer.version,
                    sha256=pointer.sha256,
                    load=lambda p=path, ld=loader: ld(p, intra_op_threads=1),  # type: ignore[misc]
                    need=need_of(path.stat().st_size),
                    pointer=pointer,
                )
                try:
                    self.swapper.restore(name, candidate)
                except AgentError as exc:
                    log.warning("journal: %s %s does not load: %s", name, pointer.version, exc)
                    continue
                hit = self.engines.get(pointer.engine_key) if pointer.engine_key else None
                record = SlotRecord(name, None, pointer.version, pointer.sha256)
                record.phase = SlotPhase.SERVING
                record.runtime = self._runtime
                if hit is not None:
                    record.engine = Resolved(
                        hit.path,
                        hit.manifest,
                        "cached",
                        tuning_matches(hit.manifest.tuning, tuning_tag(self._tuning.facts)),
                    )
                    self._engine_keys = {**self._engine_keys, name: hit.manifest.engine_key}
                    rollback = pointers.rollback.engine_key if pointers.rollback else None
                    self.engines.pin(name, active=hit.manifest.engine_key, rollback=rollback)
                self._records[name] = record
                log.info("journal: serving %s %s again", name, pointer.version)
                break

    def _fail(self, slot: ModelSlot, exc: AgentError, kind: EventKind) -> None:
        record = self._records[slot.name]
        record.last_error = str(exc)
        if isinstance(exc, PermanentError):
            record.failed_sha256 = slot.artifact.sha256
            record.retry = False
        else:
            record.retry = True
        log.warning("slot %s version %s failed: %s", slot.name, slot.version, exc)
        self._set_phase(slot, SlotPhase.FAILED)
        reason = {"reason": exc.reason} if isinstance(exc, ArtifactRefused) else {}
        self._event(kind, slot.name, str(exc), version=slot.version, **reason)

    def _set_phase(self, slot: ModelSlot, phase: SlotPhase) -> None:
        record = self._records[slot.name]
        record.phase = phase
        record.updated_at = utcnow()
        self._update()

    # --- publishing ---------------------------------------------------------------------------

    def _update(self) -> None:
        self._ready = self._desired is not None and all(
            r.phase is SlotPhase.SERVING for r in self._records.values()
        )
        self._publish_reported()

    def reported(self) -> ReportedState:
        """The current ReportedState."""
        return ReportedState(
            device_id=self._device_id,
            observed_generation=self._observed,
            reported_at=utcnow(),
            slots=tuple(self._records[n].status() for n in sorted(self._records)),
            labels=self._settings.labels,
            facts=self._tuning.facts,
            serve_url=self.serve_url,
            agent_version=self._version,
        )

    def _publish_reported(self) -> None:
        self._last_reported = self.reported()
        self._link.publish_reported(self._last_reported)

    def _event(self, kind: EventKind, slot: str | None, message: str, **data: Any) -> None:
        """Publish an Event; called from the loop, builder-output and store threads alike."""
        with self._event_lock:
            self._event_seq += 1
            seq = self._event_seq
        event = Event(
            device_id=self._device_id,
            event_id=f"{self._device_id}:{self._boot}:e{seq}",
            ts=utcnow(),
            kind=kind,
            slot=slot,
            message=message,
            data=data,
        )
        if self._outbox is None:
            log.debug("event before the outbox opened, not sent: %s", message)
            return
        self._outbox.send(Channel.EVENTS, event, event.event_id)


def run_agent(settings: AgentSettings) -> None:
    """Probe facts, choose the runtime, and run the agent until SIGINT or SIGTERM."""
    probed = probe(simulated_profile=settings.simulated_profile, runtime=settings.runtime)
    log.info("runtime %s: %s", probed.runtime, probed.runtime_reason)
    daemon = AgentDaemon(settings, probed.facts, runtime=probed.runtime)

    def _stop(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        daemon.request_stop()

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    daemon.run()
