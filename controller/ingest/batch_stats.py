"""The ingest writer's counters: :class:`BatchStats` since start, :class:`BatchCounts` as deltas.

:class:`controller.ingest.batch.IngestBatcher` reports its stats for ``/metrics`` and the bench;
an ingest worker process sends :class:`BatchCounts` between two of its stats to the controller,
whose batcher adds them up (:meth:`~controller.ingest.batch.IngestBatcher.absorb`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchStats:
    """Counters since start, for ``/metrics`` and the bench."""

    queued: int
    capacity: int
    samples_persisted: int
    samples_duplicate: int
    events_persisted: int
    batches: int
    write_errors: int
    dropped: int
    """Items given up after the database refused them repeatedly."""
    blocked_s: float
    """Total time ``submit`` callers waited for room (backpressure)."""
    rate_per_s: float
    """Samples persisted per second over the last few seconds."""


@dataclass(frozen=True)
class BatchCounts:
    """What an ingest worker process's batcher did since its previous report (deltas)."""

    samples_persisted: int = 0
    samples_duplicate: int = 0
    events_persisted: int = 0
    batches: int = 0
    write_errors: int = 0
    dropped: int = 0
    blocked_s: float = 0.0

    @classmethod
    def between(cls, before: BatchStats, after: BatchStats) -> BatchCounts:
        """The counts ``after`` adds to ``before`` (two stats of the same batcher)."""
        return cls(
            samples_persisted=after.samples_persisted - before.samples_persisted,
            samples_duplicate=after.samples_duplicate - before.samples_duplicate,
            events_persisted=after.events_persisted - before.events_persisted,
            batches=after.batches - before.batches,
            write_errors=after.write_errors - before.write_errors,
            dropped=after.dropped - before.dropped,
            blocked_s=after.blocked_s - before.blocked_s,
        )
