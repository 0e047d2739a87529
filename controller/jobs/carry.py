"""Carrying jobs to devices: a device's unfinished jobs ride in its desired document.

:class:`controller.fleet.deployments.Fleet` calls :func:`pending_jobs` whenever it builds
desired documents; a job created or finished re-publishes its device's document under a new
generation (``Fleet.touch``), so the agent sees the job appear, and leave once it finished.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from controller.db.job_store import JobStore
from shared.jobs import Job, ProfileJob, TuneJob

logger = logging.getLogger(__name__)


def pending_jobs(store: JobStore) -> Callable[[Sequence[str]], dict[str, tuple[Job, ...]]]:
    """What :class:`Fleet` puts in each device's desired document: its unfinished jobs."""

    def pending(device_ids: Sequence[str]) -> dict[str, tuple[Job, ...]]:
        jobs: dict[str, list[Job]] = {}
        for record in store.unfinished(device_ids):
            try:
                job = wire_job(record.request)
            except ValidationError as exc:
                logger.error("job %s has an invalid stored request, not sent: %s", record.id, exc)
                continue
            jobs.setdefault(record.device_id, []).append(job)
        return {device: tuple(js) for device, js in jobs.items()}

    return pending


def wire_job(request: dict[str, Any]) -> Job:
    """The job as the wire carries it, from its stored request."""
    if request.get("kind") == "profile":
        return ProfileJob.model_validate(request)
    return TuneJob.model_validate(request)
