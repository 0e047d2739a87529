"""The static analysis of pushed versions, run after the push answered, in a child process.

A push stores the version with its analysis ``pending`` and answers at once; this runner takes
the queued versions one at a time and analyses each in a child process
(:mod:`controller.analysis.child`), then stores the reports (``done``) or the reason
(``failed``). Why a child process (:mod:`controller.analysis.bounded_child`): the analysis is
CPU-bound
Python over an untrusted graph (an 800 KB model once held a push for 533 s of one
core). In a child it does not hold the server's GIL, shutdown does not wait for it (``stop``
kills it), and a run longer than ``timeout_s`` is killed and recorded as failed, the reason
naming ``--analysis-timeout``.

One at a time: a burst of pushes queues up rather than taking every core. Versions still pending
when the controller stopped are queued again when it starts (the bytes are in the store and each
run is bounded, so a restart loses no analysis), and so are those stopped at a bound shorter than
the new one (an operator who raised ``--analysis-timeout`` gets them analysed).

Supervised: a database error storing an outcome is logged and the next version is taken. Any
other exception used to end the thread without a word, leaving every later push ``pending``
for good; the thread runs under :class:`shared.supervision.Supervised` (``restart``), which
logs it with the thread's name and takes the next queued version after a back-off (the queue
lives outside the loop). The version whose run crashed stays ``pending`` until the next start,
which queues it again.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import queue
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.analysis.bounded_child import Children, InputFile, memory_bound
from controller.artifacts.store import ArtifactStore
from controller.db.repository import Repository
from controller.errors import ControllerError, NotFound
from controller.records import VersionRecord
from shared.supervision import Supervised

logger = logging.getLogger(__name__)

CHILD_MODULE = "controller.analysis.child"


@dataclass(frozen=True)
class Outcome:
    """What one analysis run gave: the reports per TensorRT version, or why there are none."""

    reports: dict[str, Any] | None
    error: str | None = None
    out_of_time_s: float | None = None
    """The bound the run was stopped at, when that is why it failed."""


class AnalysisRunner:
    """A queue of versions to analyse and the one thread that runs their child processes."""

    def __init__(self, repo: Repository, store: ArtifactStore, timeout_s: float) -> None:
        if timeout_s <= 0:
            raise ControllerError(f"the analysis timeout must be positive, got {timeout_s}")
        self._repo = repo
        self._store = store
        self.timeout_s = timeout_s
        self._queue: queue.Queue[VersionRecord | None] = queue.Queue()
        self._stopping = threading.Event()
        self._children = Children()
        self._guard: Supervised | None = None

    def start(self) -> int:
        """Queue the versions left pending by an earlier run (and those that ran out of a
        shorter bound than this one) and start the worker thread; returns how many."""
        again = self._repo.analyses_to_run(self.timeout_s)
        for record in again:
            if record.analysis_state != "pending":
                self._repo.set_analysis(record.id, "pending")
            self._queue.put(record)
        if again:
            logger.info("queued the analysis of %d version(s) again", len(again))
        self._guard = Supervised(
            "jetfleet-analysis", self._loop, policy="restart", stop=self._stopping
        ).start()
        return len(again)

    def submit(self, record: VersionRecord) -> None:
        """Queue the analysis of a version just stored as pending."""
        self._queue.put(record)

    def stop(self) -> None:
        """Kill the running analysis (its version stays pending) and stop the thread."""
        self._stopping.set()
        self._queue.put(None)
        self._children.stop()
        if self._guard is not None:
            self._guard.join(10)
            self._guard = None

    def _loop(self) -> None:
        while not self._stopping.is_set():
            record = self._queue.get()
            if record is None or self._stopping.is_set():
                return
            try:
                self._analyse(record)
            except ControllerError as exc:
                logger.error("could not store the analysis of %s: %s", _ref(record), exc)

    def _analyse(self, record: VersionRecord) -> None:
        try:
            path = self._store.local_path(record.sha256)
        except NotFound:
            outcome = Outcome(None, "the model's bytes are missing from the artifact store")
        else:
            outcome = self.run_child(path)
        if self._stopping.is_set():
            return
        if outcome.reports is not None:
            self._repo.set_analysis(record.id, "done", outcome.reports)
            logger.info("analysed %s", _ref(record))
        else:
            self._repo.set_analysis(
                record.id, "failed", error=outcome.error, out_of_time_s=outcome.out_of_time_s
            )
            logger.warning("the analysis of %s failed: %s", _ref(record), outcome.error)

    def run_child(self, model: Path) -> Outcome:
        """Analyse the ONNX file ``model`` in a child process, killed after ``timeout_s``."""
        with tempfile.TemporaryDirectory(prefix="jetfleet-analysis-") as scratch:
            report = Path(scratch) / "analysis.json"
            ended = self._children.run(
                CHILD_MODULE,
                [InputFile(model), str(report)],
                self.timeout_s,
                workdir=Path(scratch),
                memory_bytes=None if _has_tensorrt() else memory_bound([model]),
            )
            if ended.timed_out:
                return Outcome(
                    None,
                    f"it did not finish within {self.timeout_s:g} s and was stopped; restart "
                    "`jetfleet serve` with a larger --analysis-timeout to analyse it again, or "
                    "analyse the file locally with `jetfleet models analyze FILE`",
                    out_of_time_s=self.timeout_s,
                )
            if not ended.ok:
                return Outcome(None, ended.reason("the analysis process"))
            try:
                return Outcome(json.loads(report.read_text(encoding="utf-8")))
            except (OSError, ValueError) as exc:
                return Outcome(None, f"the analysis process left no readable report ({exc})")


def _has_tensorrt() -> bool:
    """Whether the analysis will check against an installed TensorRT: CUDA reserves more
    address space than any limit that fits a model, so that child runs without one."""
    return importlib.util.find_spec("tensorrt") is not None


def _ref(record: VersionRecord) -> str:
    return f"{record.model}:{record.version}"
