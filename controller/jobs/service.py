"""Profiling and tuning jobs: create them, carry them to devices, collect what comes back.

A job is stored ``pending`` and its device's desired document is published again under a new
generation with the job in it (:meth:`Fleet.touch`); the agent runs it once and answers with
``job_progress`` / ``job_result`` events, which ingest stores like every event.
:meth:`JobService.sync` reads those events back (a loop calls it every second, and every read of
a job does too), so progress and results survive a controller restart: what is in the events
table is applied again, at most once per event. A finished job leaves the next desired document.
A tune job asked to ``apply`` stores its recommendation as the hardware class's layer of a
named config.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from controller.db.job_store import JobEvent, JobRecord, JobStore
from controller.db.repository import Repository
from controller.errors import ControllerError, InvalidInput
from controller.fleet.catalog import Catalog
from controller.fleet.config_layers import parse_scope
from controller.fleet.configs import Configs, device_hardware_class
from controller.fleet.deployments import Fleet
from controller.fleet.desired import PlannedSlot
from controller.records import VersionRecord
from controller.trust.signing import FleetSigner
from shared.delegate import DelegateConfig
from shared.jobs import (
    CandidateError,
    Job,
    JobArtifact,
    JobOutcome,
    JobProgress,
    ProfileJob,
    ProfileResult,
    TuneJob,
    TuneResult,
    candidate_layer,
    parse_candidate,
    parse_candidates,
    recommend,
)
from shared.manifests import SignedManifest

logger = logging.getLogger(__name__)

SYNC_S = 1.0
"""How often the loop reads new job events."""
FULL_SCAN_S = 60.0
"""How often the loop reads every job event of the devices with unfinished jobs again."""


class _Api(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProfileRequest(_Api):
    """``POST /api/v1/devices/{id}/profile``."""

    model: str = Field(description="A model the device serves.")
    runs: int = Field(default=20, ge=1, le=10_000, description="Profiled inferences.")


class TuneRequest(_Api):
    """``POST /api/v1/tune``."""

    model: str
    version: str
    device: str = Field(description="The device that builds and benchmarks the candidates.")
    candidates: list[str] = Field(min_length=1, description="e.g. fp16, fp16+dla0, ort-basic.")
    power_modes: list[str] = Field(default_factory=list, description="nvpmodel mode names.")
    runs: int = Field(default=50, ge=1, le=100_000)
    warmups: int = Field(default=5, ge=0, le=10_000)
    apply_class: str | None = Field(
        default=None, description="Store the recommendation as this hardware class's layer."
    )
    config: str | None = Field(
        default=None,
        description="Config the layer goes into (default: the device slot's config, else the "
        "model name).",
    )


class RecommendationOut(_Api):
    candidate: str | None
    reason: str


class JobOut(_Api):
    """A job as the API shows it: ``GET /api/v1/jobs/{id}``."""

    id: str
    kind: Literal["profile", "tune"]
    device_id: str
    model: str
    version: str | None
    status: Literal["pending", "running", "succeeded", "failed", "cancelled"]
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    request: dict[str, Any]
    progress: list[JobProgress] = Field(default_factory=list)
    error: str | None = None
    profile: ProfileResult | None = None
    tune: TuneResult | None = None
    recommendation: RecommendationOut | None = None
    apply: dict[str, Any] | None = None
    applied: dict[str, Any] | None = None


class DeviceProfileOut(_Api):
    """The newest profile of one model version on one device."""

    device_id: str
    job_id: str
    finished_at: datetime | None
    profile: ProfileResult


def new_job_id() -> str:
    return f"j-{uuid.uuid4().hex[:16]}"


def job_out(record: JobRecord) -> JobOut:
    """The API view of a stored job."""
    progress = []
    for entry in record.progress:
        try:
            progress.append(JobProgress.model_validate(_without_event_id(entry)))
        except ValidationError:
            continue
    outcome = JobOutcome.model_validate(record.result) if record.result else None
    tune = outcome.tune if outcome else None
    advice = recommend(tune.candidates) if tune is not None else None
    return JobOut(
        id=record.id,
        kind="profile" if record.kind == "profile" else "tune",
        device_id=record.device_id,
        model=record.model,
        version=record.version,
        status=record.status,  # type: ignore[arg-type]
        created_at=record.created_at,
        updated_at=record.updated_at,
        finished_at=record.finished_at,
        request=record.request,
        progress=progress,
        error=record.error,
        profile=outcome.profile if outcome else None,
        tune=tune,
        recommendation=RecommendationOut(candidate=advice.candidate, reason=advice.reason)
        if advice
        else None,
        apply=record.apply,
        applied=record.applied,
    )


def _without_event_id(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "event_id"}


def pending_jobs(store: JobStore) -> Callable[[Sequence[str]], dict[str, tuple[Job, ...]]]:
    """What :class:`Fleet` puts in each device's desired document: its unfinished jobs."""

    def pending(device_ids: Sequence[str]) -> dict[str, tuple[Job, ...]]:
        jobs: dict[str, list[Job]] = {}
        for record in store.unfinished(device_ids):
            try:
                job = _wire_job(record.request)
            except ValidationError as exc:
                logger.error("job %s has an invalid stored request, not sent: %s", record.id, exc)
                continue
            jobs.setdefault(record.device_id, []).append(job)
        return {device: tuple(js) for device, js in jobs.items()}

    return pending


def _wire_job(request: dict[str, Any]) -> Job:
    if request.get("kind") == "profile":
        return ProfileJob.model_validate(request)
    return TuneJob.model_validate(request)


class JobService:
    """Jobs: create, read, cancel, and follow their events."""

    def __init__(
        self,
        store: JobStore,
        repo: Repository,
        catalog: Catalog,
        configs: Configs,
        fleet: Fleet,
        signer: FleetSigner | None = None,
    ) -> None:
        self._store = store
        self._repo = repo
        self._catalog = catalog
        self._configs = configs
        self._fleet = fleet
        self._signer = signer
        self._lock = threading.Lock()
        self._watermark = 0

    def _sign(self, version: VersionRecord) -> SignedManifest | None:
        """The version's signed manifest (the one its slots carry), for the job's artifact."""
        if self._signer is None:
            return None
        slot = PlannedSlot(
            version.model,
            version.version,
            version.sha256,
            version.size,
            DelegateConfig(),
            model_version_id=version.id,
        )
        return self._signer.model_manifests([slot])[version.id]

    # --- create ------------------------------------------------------------------------------

    def profile(self, device_id: str, request: ProfileRequest) -> JobOut:
        """Ask ``device_id`` to profile the active engine of ``request.model``."""
        device = self._repo.device(device_id)
        if not any(s.name == request.model for s in device.slots):
            served = ", ".join(s.name for s in device.slots) or "nothing"
            raise InvalidInput(
                f"{device_id} is not deployed with model '{request.model}' (it has {served}): "
                f"deploy it first (jetfleet deploy {request.model}:VERSION --device {device_id})"
            )
        job = ProfileJob(job_id=new_job_id(), model=request.model, runs=request.runs)
        record = self._store.add(
            job.job_id, "profile", device_id, job.model, None, job.model_dump(mode="json")
        )
        self._fleet.touch(device_id)
        return job_out(record)

    def tune(self, request: TuneRequest) -> JobOut:
        """Ask ``request.device`` to build, benchmark and validate the candidates."""
        device = self._repo.device(request.device)
        version = self._catalog.require_version(request.model, request.version)
        try:
            parse_candidates(request.candidates)
        except CandidateError as exc:
            raise InvalidInput(str(exc)) from exc
        apply: dict[str, Any] | None = None
        slot = next((s for s in device.slots if s.name == request.model), None)
        config = request.config or (slot.config if slot is not None else None)
        if request.apply_class is not None:
            scope = parse_scope(f"class={request.apply_class}")
            device_class = device_hardware_class(device.facts)
            if device_class != scope.value:
                raise InvalidInput(
                    f"{device.id} is hardware class {device_class or 'unknown (no facts yet)'}, "
                    f"not {scope.value}: tune on a device of the class you apply to"
                )
            apply = {"hardware_class": scope.value, "config": config or request.model}
            Configs.check_name(apply["config"])
        if config is not None and self._configs.layers(config):
            resolved = self._configs.resolve(
                config, device.id, f"{request.model}:{request.version}"
            )
        else:
            resolved = self._configs.resolve(None, device.id, f"{request.model}:{request.version}")
        shown = self._catalog.version(version.model, version.version)
        reference = self._catalog.reference(version.sha256)
        job = TuneJob(
            job_id=new_job_id(),
            model=version.model,
            version=version.version,
            artifact=JobArtifact(
                url=shown.download_url,
                sha256=version.sha256,
                size=version.size,
                signed=self._sign(version),
            ),
            reference=JobArtifact(url=reference.url, sha256=reference.sha256, size=reference.size)
            if reference is not None
            else None,
            base=resolved.delegate,
            candidates=tuple(c.strip() for c in request.candidates),
            power_modes=tuple(request.power_modes),
            runs=request.runs,
            warmups=request.warmups,
        )
        record = self._store.add(
            job.job_id,
            "tune",
            device.id,
            job.model,
            job.version,
            job.model_dump(mode="json"),
            apply=apply,
        )
        self._fleet.touch(device.id)
        return job_out(record)

    # --- read --------------------------------------------------------------------------------

    def get(self, job_id: str) -> JobOut:
        """One job, with every event stored so far applied."""
        self.sync()
        return job_out(self._store.get(job_id))

    def find(
        self, device_id: str | None, model: str | None, kind: str | None, limit: int
    ) -> list[JobOut]:
        """The newest jobs matching the filters."""
        return [job_out(r) for r in self._store.find(device_id, model, kind, limit)]

    def profiles(self, model: str, version: str) -> list[DeviceProfileOut]:
        """The newest profile of ``model:version`` per device (shown beside the analysis)."""
        self._catalog.require_version(model, version)
        result = []
        for record in self._store.latest_profiles(model, version):
            out = job_out(record)
            if out.profile is not None:
                result.append(
                    DeviceProfileOut(
                        device_id=record.device_id,
                        job_id=record.id,
                        finished_at=record.finished_at,
                        profile=out.profile,
                    )
                )
        return result

    def cancel(self, job_id: str) -> JobOut:
        """Stop sending an unfinished job (a device already running it still finishes it)."""
        record = self._store.get(job_id)
        if record.finished:
            raise InvalidInput(f"job {job_id} already {record.status}")
        finished = self._store.finish(job_id, "cancelled", None, "cancelled by the operator")
        if finished is not None:
            self._fleet.touch(record.device_id)
        return job_out(self._store.get(job_id))

    # --- events ------------------------------------------------------------------------------

    def sync(self, full: bool = False) -> int:
        """Apply the job events stored since the last call; the number applied."""
        with self._lock:
            unfinished = {r.id: r for r in self._store.unfinished()}
            if not unfinished:
                return 0
            devices = sorted({r.device_id for r in unfinished.values()})
            after = 0 if full else self._watermark
            events = self._store.job_events(devices, after)
            applied = 0
            for event in events:
                self._watermark = max(self._watermark, event.row_id)
                record = unfinished.get(str(event.data.get("job_id")))
                if record is None or record.device_id != event.device_id:
                    continue
                if self._apply_event(record, event):
                    applied += 1
            return applied

    def _apply_event(self, record: JobRecord, event: JobEvent) -> bool:
        if event.kind == "job_progress":
            try:
                progress = JobProgress.model_validate(event.data)
            except ValidationError as exc:
                logger.warning("ignored job_progress %s: %s", event.event_id, exc)
                return False
            entry = {"event_id": event.event_id, **progress.model_dump(mode="json")}
            return self._store.add_progress(record.id, entry)
        try:
            outcome = JobOutcome.model_validate(event.data)
        except ValidationError as exc:
            logger.warning("ignored job_result %s: %s", event.event_id, exc)
            return False
        if outcome.profile is not None and outcome.profile.version:
            self._store.set_version(record.id, outcome.profile.version)
        finished = self._store.finish(
            record.id, outcome.status, outcome.model_dump(mode="json"), outcome.error
        )
        if finished is None:
            return False
        logger.info("job %s on %s %s", record.id, record.device_id, outcome.status)
        if finished.apply is not None and outcome.tune is not None:
            self._store.set_applied(record.id, self._apply(finished, outcome.tune))
        try:
            self._fleet.touch(record.device_id)
        except ControllerError as exc:
            logger.error(
                "job %s finished but %s's desired state was not republished: %s",
                record.id,
                record.device_id,
                exc,
            )
        return True

    def _apply(self, record: JobRecord, tune: TuneResult) -> dict[str, Any]:
        """Store the recommendation as the class layer of the config (what ``--apply`` asks)."""
        apply = record.apply or {}
        advice = recommend(tune.candidates)
        row = next((r for r in tune.candidates if r.label == advice.candidate), None)
        if row is None:
            return {"stored": False, "error": f"nothing applied: {advice.reason}"}
        values = candidate_layer(parse_candidate(row.name))
        config, scope = str(apply["config"]), f"class={apply['hardware_class']}"
        current = next(
            (
                dict(layer.values)
                for layer in self._configs.layers(config)
                if str(layer.scope) == scope
            ),
            {},
        )
        merged = {**current, **values}
        if "onnxruntime" in current and "onnxruntime" in values:
            merged["onnxruntime"] = {**current["onnxruntime"], **values["onnxruntime"]}
        notes = []
        if row.threads and row.threads > 1:
            notes.append(
                f"{row.name} ran with {row.threads} intra-op threads, a serving setting a "
                "delegate config does not carry: served slots keep their thread count"
            )
        try:
            change = self._fleet.put_config(config, scope, merged)
        except (ControllerError, CandidateError) as exc:
            return {"stored": False, "config": config, "scope": scope, "error": str(exc)}
        if not change.devices:
            notes.append(
                f"no slot uses config '{config}' yet: deploy {record.model} with --config {config}"
            )
        return {
            "stored": True,
            "config": config,
            "scope": scope,
            "candidate": row.name,
            "values": values,
            "devices": [d.device_id for d in change.devices],
            "notes": notes,
        }


class JobLoop:
    """Calls :meth:`JobService.sync` every :data:`SYNC_S` on its own thread."""

    def __init__(self, service: JobService, interval_s: float = SYNC_S) -> None:
        self._service = service
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jetfleet-jobs", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(15)

    def _run(self) -> None:
        last_full = float("-inf")
        while not self._stop.wait(self._interval):
            now = time.monotonic()
            full = now - last_full >= FULL_SCAN_S
            try:
                self._service.sync(full=full)
                if full:
                    last_full = now
            except ControllerError as exc:
                logger.error("could not follow job events: %s", exc)
