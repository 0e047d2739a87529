"""Collecting what devices send back about their jobs: progress, results, applied advice.

The agent answers a job with ``job_progress`` / ``job_result`` events, which ingest stores like
every event. :meth:`JobResults.sync` reads those events back (the jobs loop calls it every
second, and every read of a job does too), so progress and results survive a controller
restart: what is in the events table is applied again, at most once per event. A finished job
leaves its device's next desired document. A tune job asked to ``apply`` stores its
recommendation as the hardware class's layer of a named config.

Concurrency: :meth:`JobResults.sync` runs on the jobs thread and on API threads; one lock
serialises it (the watermark and the at-most-once application are read-then-write).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pydantic import ValidationError

from controller.db.job_store import JobEvent, JobRecord, JobStore
from controller.errors import ControllerError
from controller.fleet.configs import Configs
from controller.fleet.deployments import Fleet
from shared.jobs import (
    CandidateError,
    JobOutcome,
    JobProgress,
    TuneResult,
    candidate_layer,
    parse_candidate,
    recommend,
)

logger = logging.getLogger(__name__)


class JobResults:
    """Applies the stored job events to the jobs they belong to."""

    def __init__(self, store: JobStore, configs: Configs, fleet: Fleet) -> None:
        self._store = store
        self._configs = configs
        self._fleet = fleet
        self._lock = threading.Lock()
        self._watermark = 0

    def sync(self, full: bool = False) -> int:
        """Apply the job events stored since the last call; the number applied.

        ``full``: read every job event of the devices with unfinished jobs again (from the
        first), not only those past the watermark.
        """
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
        try:  # a device on a newer agent (or a forged event) may name a candidate we cannot read
            values = candidate_layer(parse_candidate(row.name))
        except CandidateError as exc:
            return {"stored": False, "error": f"nothing applied: the recommended {exc}"}
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
