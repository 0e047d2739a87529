"""The agent's loop: take desired documents, reconcile, serve, report state and telemetry.

One thread owns every slot record and runs every step, so no step races another. The MQTT
thread only drops desired documents into an inbox; the HTTP threads only read the registry and
the readiness flag; a telemetry thread only samples the registry and metrics, so a long engine
build on the loop thread never stops telemetry. A slot moves downloading → building (only when
its engine is neither cached nor in the fleet store) → validating → serving; a failure leaves it
``failed`` with ``last_error`` while the version it had (if any) keeps serving. Each slot reports
its engine: key, runtime, where it came from, its tuning tag and whether that tag matches the
device's current power mode.
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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import FrameType
from typing import Any

from agent.downloader import Downloader, model_path
from agent.engines.cache import EngineCache
from agent.engines.identity import IdentityError, identify, tuning_matches, tuning_tag
from agent.engines.resolver import EngineResolver, Resolved
from agent.engines.store_client import StoreClient
from agent.errors import AgentError, ModelLoadError, PermanentError
from agent.facts import probe
from agent.host_stats import host_load
from agent.metrics import Metrics
from agent.mqtt_link import MqttLink
from agent.power import Apply, PowerControl, PowerError, Refuse
from agent.reconcile import Actual, ActualSlot, Download, Step, Unload, plan
from agent.registry import ModelRegistry, ServedModel
from agent.runtime import ModelLoader, warm_up
from agent.runtime_ort import load_ort
from agent.serving import ServingServer, create_app
from agent.settings import AgentSettings
from agent.state_store import downloaded, ensure_layout, load_desired, save_desired
from shared.messages import (
    DesiredState,
    DeviceFacts,
    Event,
    EventKind,
    ModelSlot,
    ReportedState,
    SlotPhase,
    SlotStatus,
    Telemetry,
)
from shared.topics import Topics

log = logging.getLogger(__name__)

RETRY_S = 15.0
"""Delay before a slot that failed transiently (network, 5xx) is tried again."""

TICK_S = 0.25
"""Longest the loop waits before it looks at the stop flag again."""

POWER_CHECK_S = 30.0
"""How often a real Jetson's power mode is read again (a change triggers retuning)."""


def agent_version() -> str:
    """The installed jetfleet distribution's version."""
    try:
        return importlib.metadata.version("jetfleet")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def _now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
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
    updated_at: datetime = field(default_factory=_now)
    engine: Resolved | None = None
    runtime: str | None = None
    retune_failed: bool = False

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
            updated_at=self.updated_at,
        )


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
        self._facts = facts
        self._runtime = runtime
        self._loader = loader or _loader_for(runtime)
        self._power = PowerControl()
        self._watch_power = facts.jetson is not None and not facts.simulated
        self._next_power_check = time.monotonic() + POWER_CHECK_S
        self._state_dir = settings.state_dir
        self._version = agent_version()
        self._boot = uuid.uuid4().hex
        self._telemetry_seq = 0
        self._event_seq = 0
        self._event_lock = threading.Lock()
        self._telemetry_stop = threading.Event()
        self._inbox: queue.Queue[DesiredState] = queue.Queue()
        self._stopping = False
        self._ready = False
        self._desired: DesiredState | None = None
        self._observed = -1
        self._heard_broker = False
        self._records: dict[str, SlotRecord] = {}
        self._next_retry: float | None = None
        self._last_reported: ReportedState | None = None
        self.registry = ModelRegistry()
        self.metrics = Metrics()
        host, port = settings.serve
        self._serve_host = host
        app = create_app(self.registry, self.metrics, lambda: self._ready, self._version)
        self._server = ServingServer(app, host, port)
        self._downloader = Downloader(self._state_dir, base_url=settings.controller_url)
        self._store = StoreClient(settings.controller_url) if settings.controller_url else None
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
            cancelled=lambda: self._stopping,
        )
        broker_host, broker_port = settings.broker
        self._link = MqttLink(
            broker_host,
            broker_port,
            self._device_id,
            Topics(settings.topic_prefix),
            on_desired=self._inbox.put,
            on_connected=self._on_connected,
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
        try:
            ensure_layout(self._state_dir)
            self._server.start()
            log.info("serving KServe v2 on %s", self.serve_url)
            kept = load_desired(self._state_dir)
            if kept is not None and kept.device_id == self._device_id:
                log.info(
                    "serving kept desired generation %d before the broker answers", kept.generation
                )
                self._accept(kept, from_broker=False)
            self._last_reported = self.reported()
            self._link.start()
            telemetry = threading.Thread(target=self._telemetry_loop, name="telemetry", daemon=True)
            telemetry.start()
            try:
                self._loop()
            finally:
                self._telemetry_stop.set()
                telemetry.join(10)
        finally:
            self._link.stop()
            self._server.stop()
            self.registry.close_all()
            self._downloader.close()
            if self._store is not None:
                self._store.close()
            log.info("agent %s stopped", self._device_id)

    # --- the loop -----------------------------------------------------------------------------

    def _on_connected(self) -> None:
        """Runs on the MQTT thread: republish the last reported state (an immutable snapshot)."""
        if self._last_reported is not None:
            self._link.publish_reported(self._last_reported)

    def _telemetry_loop(self) -> None:
        """Runs on its own thread: samples and publishes until the agent stops."""
        interval = self._settings.telemetry_interval_s
        host_load()
        last_sample = time.monotonic()
        while not self._telemetry_stop.wait(max(0.0, last_sample + interval - time.monotonic())):
            now = time.monotonic()
            self._publish_telemetry(now - last_sample)
            last_sample = now

    def _loop(self) -> None:
        while not self._stopping:
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
            if self._watch_power and time.monotonic() >= self._next_power_check:
                self._next_power_check = time.monotonic() + POWER_CHECK_S
                self._check_power_mode()

    def _accept(self, desired: DesiredState, from_broker: bool) -> None:
        first_from_broker = from_broker and not self._heard_broker
        self._heard_broker = self._heard_broker or from_broker
        if desired.generation <= self._observed and not first_from_broker:
            log.debug("desired generation %d already observed", desired.generation)
            return
        if from_broker:
            save_desired(self._state_dir, desired)
        self._desired = desired
        self._observed = desired.generation
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
            self._fail(step.slot, exc, "download_failed" if isinstance(step, Download) else "error")

    # --- steps --------------------------------------------------------------------------------

    def _unload(self, name: str) -> None:
        self._records.pop(name, None)
        self.engines.unpin(name)
        entry = self.registry.remove(name)
        if entry is not None:
            entry.drain_and_close()
            self._event("swap", name, f"unloaded {name} {entry.version}", to_version=None)
        self._update()

    def _download(self, slot: ModelSlot) -> None:
        self._set_phase(slot, SlotPhase.DOWNLOADING)
        self._event("download_started", slot.name, f"downloading {slot.name} {slot.version}")
        path = self._downloader.fetch(slot.artifact)
        self._event("download_done", slot.name, f"downloaded {path.name}", size=slot.artifact.size)

    # --- power mode and tuning ------------------------------------------------------------

    def _apply_power_mode(self, slot: ModelSlot) -> None:
        """Switch nvpmodel to the slot's power mode when the config allows it (no reboot)."""
        try:
            action = self._power.ensure(slot.delegate, self._facts)
        except PowerError as exc:
            self._event("error", slot.name, f"power mode not applied: {exc}")
            return
        if isinstance(action, Refuse):
            self._event("error", slot.name, action.reason)
        elif isinstance(action, Apply):
            log.info("%s", action.reason)
            self._refresh_power_mode()

    def _refresh_power_mode(self) -> bool:
        """Re-read nvpmodel; True when the mode changed (facts and tuning flags updated)."""
        jetson = self._facts.jetson
        mode = self._power.current()
        if jetson is None or mode is None:
            return False
        if (jetson.power_mode, jetson.power_mode_id) == (mode.name, mode.id):
            return False
        jetson = jetson.model_copy(update={"power_mode": mode.name, "power_mode_id": mode.id})
        self._facts = self._facts.model_copy(update={"jetson": jetson})
        now = tuning_tag(self._facts)
        for record in self._records.values():
            record.retune_failed = False
            if record.engine is not None:
                matches = tuning_matches(record.engine.manifest.tuning, now)
                record.engine = dataclasses.replace(record.engine, tuning_matches=matches)
        log.info("power mode is now %s (%d)", mode.name, mode.id)
        return True

    def _check_power_mode(self) -> None:
        if self._refresh_power_mode():
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
        if slot.delegate.power_mode is not None and self._watch_power:
            self._apply_power_mode(slot)
        try:
            identity = identify(self._runtime, self._facts, slot.artifact.sha256, slot.delegate)
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

    def _load(self, slot: ModelSlot, retune: bool = False) -> None:
        engine = self._resolve(slot, retune=retune)
        self._set_phase(slot, SlotPhase.VALIDATING)
        model = self._loader(engine.path, intra_op_threads=slot.serving.intra_op_threads)
        try:
            warm_up(model)
        except AgentError as exc:
            model.close()
            raise ModelLoadError(f"warm-up inference on zeros failed: {exc}") from exc
        entry = ServedModel(
            slot.name, slot.version, slot.artifact.sha256, model, slot.serving.max_queue
        )
        old = self.registry.swap(entry)
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
            f"{slot.name} now serves {slot.version}",
            from_version=old.version if old else None,
            to_version=slot.version,
            engine_key=engine.key,
            engine_source=engine.source,
        )
        if old is not None:
            old.drain_and_close()

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
        self._event(kind, slot.name, str(exc), version=slot.version)

    def _set_phase(self, slot: ModelSlot, phase: SlotPhase) -> None:
        record = self._records[slot.name]
        record.phase = phase
        record.updated_at = _now()
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
            reported_at=_now(),
            slots=tuple(self._records[n].status() for n in sorted(self._records)),
            labels=self._settings.labels,
            facts=self._facts,
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
            ts=_now(),
            kind=kind,
            slot=slot,
            message=message,
            data=data,
        )
        self._link.publish_event(event)

    def _publish_telemetry(self, elapsed_s: float) -> None:
        load = host_load()
        self._telemetry_seq += 1
        sample = Telemetry(
            device_id=self._device_id,
            sample_id=f"{self._device_id}:{self._boot}:{self._telemetry_seq}",
            ts=_now(),
            interval_s=max(elapsed_s, 1e-3),
            cpu_percent=load.cpu_percent,
            memory_used_bytes=load.memory_used_bytes,
            memory_total_bytes=load.memory_total_bytes,
            models=self.metrics.sample(dict(self.registry.versions())),
        )
        self._link.publish_telemetry(sample)


def _loader_for(runtime: str) -> ModelLoader:
    if runtime == "tensorrt":
        from agent.runtime_trt import load_trt

        return load_trt
    return load_ort


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
