"""``/api/v1`` routes of on-device jobs: profile a device's engine, tune a model, read a job."""

from __future__ import annotations

from fastapi import APIRouter, Query

from controller.api.params import DeviceIdPath, JobIdPath, ModelNamePath, VersionPath
from controller.errors import ControllerError
from controller.jobs.schemas import DeviceProfileOut, JobOut, ProfileRequest, TuneRequest
from controller.jobs.service import JobService
from controller.services import Services


def jobs_router(services: Services) -> APIRouter:
    """The job routes over ``services.jobs``."""
    router = APIRouter(tags=["jobs"])

    def service() -> JobService:
        if services.jobs is None:
            raise ControllerError("jobs are not enabled on this controller")
        return services.jobs

    @router.post("/devices/{device_id}/profile", status_code=201)
    def profile_device(device_id: DeviceIdPath, body: ProfileRequest) -> JobOut:
        """Ask the device to profile the active engine of a model it serves."""
        return service().profile(device_id, body)

    @router.post("/tune", status_code=201)
    def tune(body: TuneRequest) -> JobOut:
        """Ask a device to build, benchmark and validate candidate delegate configs."""
        return service().tune(body)

    @router.get("/jobs")
    def list_jobs(
        device: str | None = None,
        model: str | None = None,
        kind: str | None = None,
        limit: int = Query(default=50, ge=1, le=1000),
    ) -> list[JobOut]:
        return service().find(device, model, kind, limit)

    @router.get("/jobs/{job_id}")
    def show_job(job_id: JobIdPath) -> JobOut:
        """The job with its progress so far and, once finished, its result."""
        return service().get(job_id)

    @router.post("/jobs/{job_id}/cancel")
    def cancel_job(job_id: JobIdPath) -> JobOut:
        return service().cancel(job_id)

    @router.get("/models/{name}/versions/{version}/profiles")
    def version_profiles(name: ModelNamePath, version: VersionPath) -> list[DeviceProfileOut]:
        """The newest on-device profile of the version per device (next to its analysis)."""
        return service().profiles(name, version)

    return router
