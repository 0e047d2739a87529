"""The agent's loop: take desired documents, reconcile, serve, report state and telemetry.

The daemon builds the agent's parts, accepts desired documents (signature, generation), compares
them with what the slots have through the pure :func:`agent.slots.plan.plan`, hands the steps to
the slot pipeline (:mod:`agent.slots.pipeline`: verify → download, then verify → batching →
resolve → reference → swap, with the phases, events and failures of each slot) and reports the
device's state.

One thread (the loop) owns the slot records and runs every step, so no step races another; it
publishes a frozen view of them (:class:`agent.slots.records.SlotsView`) for the jobs and
telemetry threads. The MQTT thread only drops desired documents into an inbox; the HTTP threads
only read the registry and the readiness flag; the telemetry thread (:mod:`agent.telemetry.loop`)
only samples, so a long engine build on the loop never stops telemetry. Telemetry and events
leave through the disk spool (:mod:`agent.link.outbox`), so a broker outage delays them but loses
none; systemd hears READY, STATUS and watchdog pings through :mod:`agent.service.lifecycle`;
power-mode handling lives in :mod:`agent.jobs.power_facts`; the document's agent release order
goes to :mod:`agent.update.updates`, which may end the loop to re-execute into a new release.
"""

from __future__ import annotations

import importlib.metadata
import logging
import queue
import signal
import time
import uuid
from types import FrameType

from agent.engines.identity import tuning_tag
from agent.engines.trt_interpreter import configure as configure_tensorrt_python
from agent.hardware.facts import probe
from agent.hardware.runtime_kinds import ONNXRUNTIME, runtime_kind
from agent.jobs.power_facts import PowerTuning
from agent.jobs.resources import JobResources
from agent.jobs.runner import JobRunner
from agent.link.mqtt_link import MqttLink
from agent.link.outbox import Outbox
from agent.runtimes.base import ModelLoader
from agent.service.lifecycle import ServiceNotifications, phase_text
from agent.serving.app import create_app
from agent.serving.batching import Batcher
from agent.serving.core import ModelRegistry
from agent.serving.http_server import ServingServer
from agent.serving.prometheus import PromMetrics
from agent.serving.shared_memory import SharedMemoryRegions
from agent.settings import AgentSettings
from agent.slots.assembly import assemble_slots
from agent.slots.events import EventPublisher
from agent.slots.plan import Actual, plan
from agent.slots.records import utcnow
from agent.slots.state_store import (
    DESIRED_FILE,
    KeptDesired,
    downloaded,
    ensure_layout,
    load_desired,
)
from agent.swap.budget import MemoryBudget
from agent.swap.headroom import HeadroomProbe, Kind
from agent.swap.loaders import loader_for
from agent.telemetry.collectors.health import default_sampler
from agent.telemetry.collectors.inference import HistogramMetrics, InferenceCollector
from agent.telemetry.loop import TelemetryLoop
from agent.trust.store import TrustStore
from agent.trust.verifier import ArtifactVerifier
from agent.update.updates import AgentUpdates
from shared.facts import DeviceFacts
from shared.messages import DesiredState, ReportedState
from shared.topics import Topics

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
        runtime: str = ONNXRUNTIME.name,
    ) -> None:
        self._settings = settings
        configure_tensorrt_python(settings.tensorrt_python)  # where TensorRT hosts and builds run
        self._device_id = settings.require_device_id()
        self._state_dir = state_dir = settings.state_dir
        self._kept = KeptDesired(state_dir)
        self._version = agent_version()
        self._events = EventPublisher(self._device_id, uuid.uuid4().hex)
        emit = self._events.emit
        self._tuning = PowerTuning(facts, emit)
        self._inbox: queue.Queue[DesiredState] = queue.Queue()
        self._stopping = False
        self._ready = False
        self._observed = -1
        self._heard_broker = False
        self._next_retry: float | None = None
        self._last_reported: ReportedState | None = None
        self._outbox: Outbox | None = None
        self.service = ServiceNotifications()
        self.registry = ModelRegistry()
        self.metrics = HistogramMetrics()
        self.batcher = Batcher()
        gpu = runtime_kind(runtime).needs_cuda_device
        kind: Kind = "jetson" if facts.jetson else "dgpu" if gpu else "cpu"
        self.budget = MemoryBudget(
            HeadroomProbe(kind, budget_fraction=settings.memory_budget_fraction)
        )
        self.verifier = ArtifactVerifier(TrustStore.open(state_dir), self._device_id, emit=emit)
        self._slot_parts = assemble_slots(
            settings,
            device_id=self._device_id,
            runtime=runtime,
            registry=self.registry,
            batcher=self.batcher,
            budget=self.budget,
            verifier=self.verifier,
            power=self._tuning,
            loader=loader or loader_for(runtime, settings.swap_mode),
            custom_loader=loader is not None,
            emit=emit,
            report=self._update,
            stopping=lambda: self._stopping,
            supervising=self._supervising,
        )
        self.slots = self._slot_parts.table
        self.swapper = self._slot_parts.swapper
        self.prometheus = PromMetrics(self.registry, self.swapper.stats)
        self._sampler = default_sampler(
            state_dir,
            InferenceCollector(
                self.metrics,
                active=self.registry.versions,
                engine_keys=lambda: self.slots.view.engine_keys(),
                queue_depth=self.registry.inflight,
                swaps_total=lambda: self.slots.view.swaps,
            ),
            mapping=dict.fromkeys(settings.disabled_collectors, False),
            simulated_profile=settings.simulated_profile,
            seed=self._device_id,
        )
        host, port = settings.serve
        self._serve_host = host
        self.shared_memory = (
            SharedMemoryRegions(owners=settings.serve_shared_memory_uids)
            if settings.serve_shared_memory
            else None
        )
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
        self.updates = AgentUpdates(
            settings,
            self._version,
            facts.jetson.jetpack if facts.jetson else None,
            self.verifier,
            self._events,
            listening=lambda: self._server.socket,
            stopping=lambda: self._stopping,
        )
        self.jobs = JobRunner(
            JobResources(
                runtime,
                state_dir,
                view=lambda: self.slots.view,
                facts=lambda: self._tuning.facts,
                budget=self.budget,
                fetch=self._slot_parts.downloader.fetch,
                build_timeout_s=settings.build_timeout_s,
                verify_model=self.verifier.check_job_artifact,
            ),
            emit,
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
            self._events.attach(self._outbox)
            self.jobs.start()
            self._slot_parts.restore()
            self._server.start()
            self.service.serving()
            log.info("serving KServe v2 on %s", self.serve_url)
            self.updates.resume()
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
                self._events.boot,
                self._sampler,
                self._outbox,
                self._settings.telemetry_interval_s,
            )
            telemetry.start()
            self._loop()
            self.updates.stopping(self.service)  # STOPPING=1, or RELOADING=1 for a restart
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
            self._slot_parts.close()
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
        status = phase_text(
            self.slots.statuses(), self.slots.desired is not None, self._link.connected
        )
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
            self._kept.retry()
            if self._next_retry is not None and time.monotonic() >= self._next_retry:
                self._reconcile()
            if self.updates.tick(self._link.connected, self.slots.statuses()):
                self._stopping = True  # a new release is in place: restart into it
            if self.updates.take_changed():
                self._update()
            if self._tuning.due() and self._tuning.refresh():
                # The power mode changed by itself: report it, then retune what no longer matches.
                self.slots.mark_tuning(tuning_tag(self._tuning.facts))
                self._update()
                self._reconcile()

    def _accept(self, desired: DesiredState, from_broker: bool) -> None:
        source = "broker" if from_broker else DESIRED_FILE
        if self.verifier.check_document(desired, self._observed, source) is not None:
            return
        first_from_broker = from_broker and not self._heard_broker
        self._heard_broker = self._heard_broker or from_broker
        if desired.generation <= self._observed and not first_from_broker:
            if from_broker and desired.generation == self._observed and self.verifier.trust.pinned:
                # A verified republish (new signatures, a key rotation): keep it, change nothing.
                self._kept.save(desired)
                self.slots.keep_desired(desired)
                self.verifier.follow_rotation(desired)
            log.debug("desired generation %d already observed", desired.generation)
            return
        if from_broker:
            self._kept.save(desired)
        self._observed = desired.generation
        self.slots.accept(desired)
        self.verifier.follow_rotation(desired)
        self.jobs.submit(desired.jobs)
        self.updates.order(desired.agent)
        log.info("desired generation %d: %d slot(s)", desired.generation, len(desired.slots))
        self._reconcile()

    def _reconcile(self) -> None:
        self._next_retry = None
        desired = self.slots.desired
        if desired is None:
            return
        actual = Actual(slots=self.slots.actual(), downloaded=downloaded(self._state_dir))
        self._slot_parts.pipeline.run(plan(desired, actual))
        if self.slots.retrying():
            self._next_retry = time.monotonic() + RETRY_S
        self._update()

    # --- reporting ----------------------------------------------------------------------------

    def _update(self) -> None:
        self._ready = self.slots.desired is not None and self.slots.all_serving()
        self._last_reported = self.reported()
        self._link.publish_reported(self._last_reported)

    def reported(self) -> ReportedState:
        """The current ReportedState."""
        return ReportedState(
            device_id=self._device_id,
            observed_generation=self._observed,
            reported_at=utcnow(),
            slots=self.slots.statuses(),
            labels=self._settings.labels,
            facts=self._tuning.facts,
            serve_url=self.serve_url,
            agent_version=self._version,
            agent_update=self.updates.status,
        )


def run_agent(settings: AgentSettings) -> None:
    """Probe facts, choose the runtime, and run the agent until SIGINT or SIGTERM."""
    probed = probe(
        simulated_profile=settings.simulated_profile,
        runtime=settings.runtime,
        tensorrt_python=settings.tensorrt_python,
    )
    log.info("runtime %s: %s", probed.runtime, probed.runtime_reason)
    daemon = AgentDaemon(settings, probed.facts, runtime=probed.runtime)

    def _stop(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        daemon.request_stop()

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    daemon.run()
    daemon.updates.restart_if_due()  # execv of the launcher when a new release was switched in
