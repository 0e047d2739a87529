"""Profiling and tuning jobs: create them, read them, cancel them.

A job is stored ``pending`` and its device's desired document is published again under a new
generation with the job in it (:meth:`Fleet.touch`; what the document carries:
:mod:`controller.jobs.carry`); the agent runs it once and answers with events, which
:mod:`controller.jobs.results` applies (every read of a job applies what is stored so far; the
jobs thread, :mod:`controller.jobs.loop`, does it every second).
"""

from __future__ import annotations

import uuid
from typing import Any

from controller.db.job_store import JobStore
from controller.db.repository import Repository
from controller.errors import Conflict, InvalidInput
from controller.fleet.catalog import Catalog
from controller.fleet.config_layers import parse_scope
from controller.fleet.configs import Configs, device_hardware_class
from controller.fleet.deployments import Fleet
from controller.fleet.desired import PlannedSlot
from controller.jobs.results import JobResults
from controller.jobs.schemas import (
    DeviceProfileOut,
    JobOut,
    ProfileRequest,
    TuneRequest,
    job_out,
)
from controller.records import VersionRecord
from controller.trust.signing import FleetSigner
from shared.delegate import DelegateConfig
from shared.jobs import (
    CandidateError,
    JobArtifact,
    ProfileJob,
    TuneJob,
    parse_candidates,
)
from shared.manifests import SignedManifest


def new_job_id() -> str:
    return f"j-{uuid.uuid4().hex[:16]}"


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
        self._results = JobResults(store, configs, fleet)

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
            raise Conflict(
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
            device_class = device_hardware_class(device.device_facts)
            if device_class != scope.value:
                why = (
                    "its stored facts are unreadable" if device.facts_unreadable else "no facts yet"
                )
                unknown = f"unknown ({why})"
                raise InvalidInput(
                    f"{device.id} is hardware class {device_class or unknown}, "
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
            raise Conflict(f"job {job_id} already {record.status}")
        finished = self._store.finish(job_id, "cancelled", None, "cancelled by the operator")
        if finished is not None:
            self._fleet.touch(record.device_id)
        return job_out(self._store.get(job_id))

    def sync(self, full: bool = False) -> int:
        """Apply the job events stored since the last call; the number applied."""
        return self._results.sync(full)
