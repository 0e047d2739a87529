"""Which job runs now and which finished, kept across restarts in ``jobs/journal.json``.

Each job id runs once: the journal (replaced atomically) records the job running now and the ids
finished. A job found running at start was interrupted by a restart and is reported failed,
never run again (:meth:`agent.jobs.runner.JobRunner.start`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from agent.durable_files import write_atomically
from shared.jobs import Job

log = logging.getLogger(__name__)

JOURNAL = "journal.json"
KEEP_FINISHED = 256
"""Finished ids remembered; the controller drops a finished job from the next desired document,
so an id older than this many jobs cannot come back."""


class JobJournal:
    """Which job runs now and which finished, kept across restarts (atomic replace)."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / JOURNAL
        self.finished: list[str] = []
        self.running: dict[str, str] | None = None
        """``job_id``, ``kind`` and ``model`` of the job running now."""
        try:
            data = json.loads(self._path.read_text())
            self.finished = [str(i) for i in data.get("finished", [])]
            running = data.get("running")
            self.running = {str(k): str(v) for k, v in running.items()} if running else None
        except FileNotFoundError:
            pass
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("ignored unreadable job journal %s: %s", self._path, exc)

    def _save(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self.finished = self.finished[-KEEP_FINISHED:]
        body = {"finished": self.finished, "running": self.running}
        write_atomically(self._path, json.dumps(body).encode())

    def begin(self, job: Job) -> None:
        self.running = {"job_id": job.job_id, "kind": job.kind, "model": job.model}
        self._save()

    def finish(self, job_id: str) -> None:
        if job_id not in self.finished:
            self.finished.append(job_id)
        if self.running is not None and self.running.get("job_id") == job_id:
            self.running = None
        self._save()

    def done(self, job_id: str) -> bool:
        return job_id in self.finished
