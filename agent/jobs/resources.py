"""What a job may use from the agent, and the handle one running job works through.

:class:`JobResources` is everything the jobs thread is given: the frozen slots view the loop thread
publishes (:class:`agent.slots.records.SlotsView`), the device facts, the memory budget it shares
with the hot-swap (:class:`agent.swap.budget.MemoryBudget`), the downloader and the trust check.
It is given nothing the loop thread changes in place.

:class:`JobContext` is one job's handle on them: progress events, the stop flag, reference
outputs, and memory reserved beside the served models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import AgentError
from agent.slots.records import SlotsView
from agent.swap.admission import Need
from agent.swap.budget import MemoryBudget, Reservation
from agent.swap.validation import BadReference, Reference, parse_reference
from shared.facts import DeviceFacts
from shared.jobs import Job, JobArtifact, JobProgress
from shared.messages import ArtifactRef

Emit = Callable[..., None]
"""``emit(kind, slot, message, **data)``: the agent's event publisher (thread-safe)."""


class JobFailed(AgentError):
    """The job cannot run or did not finish; the message says why and what to do."""


def ort_providers() -> list[str]:
    """The execution providers of the installed ONNX Runtime (none when it does not import)."""
    try:
        from agent.runtimes.ort import available_providers
    except ImportError:
        return []
    return available_providers()


@dataclass(frozen=True)
class JobResources:
    """What jobs need from the agent: its runtime, the slots view, the memory budget, settings."""

    runtime: str
    state_dir: Path
    view: Callable[[], SlotsView]
    """The loop thread's latest published slots view (records and desired document)."""
    facts: Callable[[], DeviceFacts]
    budget: MemoryBudget
    fetch: Callable[[ArtifactRef], Path]
    """The agent's downloader: a verified local copy of an artifact."""
    build_timeout_s: float = 3600.0
    available_providers: Callable[[], list[str]] = field(default=lambda: ort_providers())
    verify_model: Callable[[str, str, JobArtifact], None] = field(default=lambda *_: None)
    """Raises (ArtifactRefused) unless the job's model is signed with the fleet key."""


class JobContext:
    """One running job's handle on the agent."""

    def __init__(
        self, host: JobResources, job: Job, emit: Emit, cancelled: Callable[[], bool]
    ) -> None:
        self.host = host
        self.job = job
        self._emit = emit
        self.cancelled = cancelled

    def progress(self, step: int, steps: int, message: str, **extra: Any) -> None:
        job = self.job
        progress = JobProgress(
            job_id=job.job_id, job_kind=job.kind, step=step, steps=steps, detail=message, **extra
        )
        self._emit("job_progress", job.model, message, **progress.model_dump(mode="json"))

    def reference(self, artifact: JobArtifact | None) -> Reference | None:
        """The reference outputs ``artifact`` holds (downloaded and verified), if any."""
        if artifact is None:
            return None
        path = self.host.fetch(artifact)
        try:
            return parse_reference(path.read_bytes())
        except BadReference as exc:
            raise JobFailed(f"reference outputs: {exc}") from exc

    def reserve_beside(self, need: Need) -> Reservation:
        """Memory for an extra engine next to every served one (replacing none); release it."""
        return self.host.budget.reserve(need, f"job:{self.job.job_id}")
