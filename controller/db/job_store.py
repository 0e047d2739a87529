"""Jobs in the database (one transaction per method), and the job events they are fed from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from controller.db.schema import EventRecord, utcnow
from controller.db.schema_jobs import JobRow
from controller.db.session import SessionStore
from controller.errors import NotFound

UNFINISHED = ("pending", "running")
MAX_PROGRESS = 500
"""Progress entries kept per job (a tune of 32 candidates sends 65)."""


@dataclass(frozen=True)
class JobRecord:
    """One stored job."""

    id: str
    kind: str
    device_id: str
    model: str
    version: str | None
    request: dict[str, Any]
    status: str
    progress: list[dict[str, Any]]
    result: dict[str, Any] | None
    apply: dict[str, Any] | None
    applied: dict[str, Any] | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @property
    def finished(self) -> bool:
        return self.status not in UNFINISHED


@dataclass(frozen=True)
class JobEvent:
    """A ``job_progress`` or ``job_result`` event as stored by ingest."""

    row_id: int
    device_id: str
    event_id: str
    kind: str
    data: dict[str, Any]


class JobStore(SessionStore):
    """The ``jobs`` table."""

    def add(
        self,
        job_id: str,
        kind: str,
        device_id: str,
        model: str,
        version: str | None,
        request: dict[str, Any],
        apply: dict[str, Any] | None = None,
    ) -> JobRecord:
        """Store a new pending job."""
        now = utcnow()
        with self._tx() as session:
            row = JobRow(
                id=job_id,
                kind=kind,
                device_id=device_id,
                model=model,
                version=version,
                request=request,
                status="pending",
                progress=[],
                apply=apply,
                created_at=now,
                updated_at=now,
            )
            session.add(row)
            session.flush()
            return _record(row)

    def get(self, job_id: str) -> JobRecord:
        """One job, or NotFound."""
        with self._tx() as session:
            row = session.get(JobRow, job_id)
            if row is None:
                raise NotFound(f"unknown job '{job_id}': see `GET /api/v1/jobs`")
            return _record(row)

    def find(
        self,
        device_id: str | None = None,
        model: str | None = None,
        kind: str | None = None,
        limit: int = 50,
    ) -> list[JobRecord]:
        """The newest jobs matching the filters, newest first."""
        with self._tx() as session:
            query = select(JobRow).order_by(JobRow.created_at.desc(), JobRow.id).limit(limit)
            if device_id is not None:
                query = query.where(JobRow.device_id == device_id)
            if model is not None:
                query = query.where(JobRow.model == model)
            if kind is not None:
                query = query.where(JobRow.kind == kind)
            return [_record(r) for r in session.execute(query).scalars()]

    def unfinished(self, device_ids: Sequence[str] | None = None) -> list[JobRecord]:
        """Pending and running jobs (of these devices), oldest first."""
        with self._tx() as session:
            query = (
                select(JobRow)
                .where(JobRow.status.in_(UNFINISHED))
                .order_by(JobRow.created_at, JobRow.id)
            )
            if device_ids is not None:
                query = query.where(JobRow.device_id.in_(list(device_ids)))
            return [_record(r) for r in session.execute(query).scalars()]

    def add_progress(self, job_id: str, entry: dict[str, Any]) -> bool:
        """Append a progress entry (once per ``event_id``); the job is ``running`` from now."""
        with self._tx() as session:
            row = session.get(JobRow, job_id, with_for_update=True)
            if row is None or row.status not in UNFINISHED:
                return False
            progress = list(row.progress or [])
            if any(p.get("event_id") == entry.get("event_id") for p in progress):
                return False
            row.progress = [*progress, entry][-MAX_PROGRESS:]
            row.status = "running"
            row.updated_at = utcnow()
            return True

    def finish(
        self, job_id: str, status: str, result: dict[str, Any] | None, error: str | None
    ) -> JobRecord | None:
        """Record the end of an unfinished job; None when it had ended already."""
        with self._tx() as session:
            row = session.get(JobRow, job_id, with_for_update=True)
            if row is None or row.status not in UNFINISHED:
                return None
            now = utcnow()
            row.status, row.result, row.error = status, result, error
            row.updated_at = row.finished_at = now
            session.flush()
            return _record(row)

    def set_applied(self, job_id: str, applied: dict[str, Any]) -> None:
        """Record what ``--apply`` stored (or why it could not)."""
        with self._tx() as session:
            row = session.get(JobRow, job_id)
            if row is not None:
                row.applied = applied
                row.updated_at = utcnow()

    def latest_profiles(self, model: str, version: str) -> list[JobRecord]:
        """The newest succeeded profile of ``model:version`` on each device, by device."""
        with self._tx() as session:
            rows = session.execute(
                select(JobRow)
                .where(
                    JobRow.kind == "profile",
                    JobRow.status == "succeeded",
                    JobRow.model == model,
                    JobRow.version == version,
                )
                .order_by(JobRow.finished_at.desc(), JobRow.id)
            ).scalars()
            newest: dict[str, JobRecord] = {}
            for row in rows:
                newest.setdefault(row.device_id, _record(row))
            return [newest[d] for d in sorted(newest)]

    def set_version(self, job_id: str, version: str | None) -> None:
        """The version a profile job measured (known once the device answers)."""
        with self._tx() as session:
            row = session.get(JobRow, job_id)
            if row is not None:
                row.version = version

    def job_events(self, device_ids: Sequence[str], after_id: int) -> list[JobEvent]:
        """``job_progress``/``job_result`` events of these devices stored after row ``after_id``."""
        if not device_ids:
            return []
        with self._tx() as session:
            rows = session.execute(
                select(EventRecord)
                .where(
                    EventRecord.id > after_id,
                    EventRecord.kind.in_(("job_progress", "job_result")),
                    EventRecord.device_id.in_(list(device_ids)),
                )
                .order_by(EventRecord.id)
            ).scalars()
            return [JobEvent(r.id, r.device_id, r.event_id, r.kind, dict(r.data)) for r in rows]


def _record(row: JobRow) -> JobRecord:
    return JobRecord(
        id=row.id,
        kind=row.kind,
        device_id=row.device_id,
        model=row.model,
        version=row.version,
        request=dict(row.request or {}),
        status=row.status,
        progress=list(row.progress or []),
        result=dict(row.result) if row.result is not None else None,
        apply=dict(row.apply) if row.apply is not None else None,
        applied=dict(row.applied) if row.applied is not None else None,
        error=row.error,
        created_at=row.created_at,
        updated_at=row.updated_at,
        finished_at=row.finished_at,
    )
