"""Optional dynamic batching of infer requests: merge small requests into one inference.

Why: on an edge GPU one inference of 8 rows costs little more than one of 1 row, so concurrent
clients sending one image each get more throughput when their requests are concatenated along
axis 0 and run once. Triton calls this the dynamic batcher; its two knobs are the same here:
``max_batch_size`` (rows per inference; 1 = off) and ``max_queue_delay_ms`` (how long the oldest
request may wait for company).

Two layers:

* :func:`plan` is pure: given the pending requests (rows, shape signature, arrival time), the
  policy and *now*, it says which requests to run together now, or how long to wait. Requests
  whose shapes (other than the batch dimension) or dtypes differ are never merged.
* :class:`Batcher` is the adapter: request threads enqueue and wait on one condition variable;
  whichever waiting thread sees a batch due runs it (no extra thread to start or stop), then
  hands every request its slice of the outputs.

Swaps: the caller leases its engine through :meth:`agent.serving.core.ModelRegistry.acquire`
*before* queueing and passes that entry as the queue key, so requests are merged only with
others holding the same engine, the batch runs on it, and a swap's drain waits for every
request in a batch exactly as for a lone request. An error fails only the requests of that batch.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy loads with the first model, not at agent start (idle RSS)
    import numpy as np

from agent.errors import InferenceError, InvalidInputError
from agent.runtimes.base import LoadedModel, TensorSpec

Feeds = Mapping[str, "np.ndarray"]
Signature = tuple[tuple[str, str, tuple[int, ...]], ...]
SIZE_BOUNDS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass(frozen=True)
class BatchPolicy:
    """How one model batches: ``max_batch_size`` rows per inference, the oldest waits at most
    ``max_queue_delay_s``. ``max_batch_size`` 1 turns batching off."""

    max_batch_size: int = 1
    max_queue_delay_s: float = 0.0

    @property
    def enabled(self) -> bool:
        return self.max_batch_size > 1

    @classmethod
    def of(cls, max_batch_size: int, max_queue_delay_ms: float) -> BatchPolicy:
        """The policy of a slot's serving settings (milliseconds on the wire)."""
        return cls(max(1, max_batch_size), max(0.0, max_queue_delay_ms) / 1000.0)


@dataclass(frozen=True)
class Pending:
    """What :func:`plan` needs to know of one queued request."""

    rows: int
    signature: Signature
    enqueued_at: float


@dataclass(frozen=True)
class Decision:
    """Run ``take`` (indices into the pending list) now; else wait ``wait_s`` (None: no one)."""

    take: tuple[int, ...] = ()
    wait_s: float | None = None


def plan(pending: Sequence[Pending], policy: BatchPolicy, now: float) -> Decision:
    """Which pending requests to run as one inference now, oldest first.

    Requests group by signature. A group is due when its rows reach ``max_batch_size`` or its
    oldest request has waited ``max_queue_delay_s``; a due group gives its oldest requests in
    arrival order while they fit in ``max_batch_size`` (a request bigger than that runs alone).
    With nothing due, the decision is the time until the earliest group becomes due.
    """
    groups: dict[Signature, list[int]] = {}
    for i, p in enumerate(pending):
        groups.setdefault(p.signature, []).append(i)
    wait: float | None = None
    for members in groups.values():
        oldest = pending[members[0]].enqueued_at
        rows = sum(pending[i].rows for i in members)
        due_at = oldest + policy.max_queue_delay_s
        if rows >= policy.max_batch_size or now >= due_at:
            take: list[int] = []
            total = 0
            for i in members:
                if take and total + pending[i].rows > policy.max_batch_size:
                    break
                take.append(i)
                total += pending[i].rows
            return Decision(take=tuple(take))
        left = due_at - now
        wait = left if wait is None else min(wait, left)
    return Decision(wait_s=wait)


def batchable(inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]) -> bool:
    """True when every input and output has a dynamic first (batch) dimension."""
    specs = [*inputs, *outputs]
    return bool(inputs) and all(len(s.shape) >= 1 and s.shape[0] == -1 for s in specs)


def signature_of(feeds: Feeds) -> tuple[int, Signature] | None:
    """(rows, signature) of a request, or None when its inputs disagree on the batch size."""
    rows = {int(a.shape[0]) if a.ndim else -1 for a in feeds.values()}
    if len(rows) != 1 or -1 in rows:
        return None
    sig = tuple(sorted((n, a.dtype.str, tuple(a.shape[1:])) for n, a in feeds.items()))
    return rows.pop(), sig


def merge(requests: Sequence[Feeds]) -> dict[str, np.ndarray]:
    """One feed per input: the requests' tensors concatenated along axis 0, in order."""
    import numpy as np

    if len(requests) == 1:
        return dict(requests[0])
    return {name: np.concatenate([r[name] for r in requests], axis=0) for name in requests[0]}


def split(results: Mapping[str, np.ndarray], rows: Sequence[int]) -> list[dict[str, np.ndarray]]:
    """Each request's slice of the batch outputs; InferenceError when an output lost the batch."""
    import numpy as np

    total = sum(rows)
    for name, array in results.items():
        if array.ndim == 0 or array.shape[0] != total:
            raise InferenceError(
                f"output {name!r} has shape {list(array.shape)}, not {total} rows of the batch: "
                "set max_batch_size to 1 for this model"
            )
    offsets = np.cumsum(rows)[:-1]
    parts: list[dict[str, np.ndarray]] = [{} for _ in rows]
    for name, array in results.items():
        for part, piece in zip(parts, np.split(array, offsets, axis=0), strict=True):
            part[name] = piece
    return parts


@dataclass(eq=False)
class _Request:
    feeds: Feeds
    info: Pending
    result: dict[str, np.ndarray] | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass(eq=False)
class _Queue:
    model: LoadedModel
    items: list[_Request] = field(default_factory=list)


class _Stats:
    def __init__(self) -> None:
        self.batches = 0
        self.buckets = [0] * (len(SIZE_BOUNDS) + 1)
        self.rows = 0

    def record(self, rows: int) -> None:
        self.batches += 1
        self.rows += rows
        self.buckets[bisect.bisect_left(SIZE_BOUNDS, rows)] += 1


class Batcher:
    """Per-model batching policies, the queues of waiting requests, and batch counters.

    Thread-safe; :meth:`infer` blocks the calling (thread-pool) thread until its slice of a
    batch is ready. ``clock`` is injectable for tests; it must be monotonic.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._policies: dict[str, BatchPolicy] = {}
        self._queues: dict[Hashable, _Queue] = {}
        self._stats: dict[str, _Stats] = {}

    def configure(self, name: str, max_batch_size: int = 1, max_queue_delay_ms: float = 0) -> None:
        """Set ``name``'s policy (from its slot's ``ServingSettings``); 1 turns batching off."""
        policy = BatchPolicy.of(max_batch_size, max_queue_delay_ms)
        with self._cond:
            if policy.enabled:
                self._policies[name] = policy
            else:
                self._policies.pop(name, None)

    def policy(self, name: str) -> BatchPolicy:
        with self._cond:
            return self._policies.get(name, BatchPolicy())

    def infer(
        self, name: str, key: Hashable, model: LoadedModel, feeds: Feeds
    ) -> dict[str, np.ndarray]:
        """Run ``feeds`` on ``model``, batched with other requests holding the same ``key``.

        ``key`` is the leased serving entry: requests merge only on the engine they leased.
        Runs directly when ``name`` does not batch, the model has a static batch dimension,
        or the request's inputs disagree on their first dimension.
        """
        policy = self.policy(name)
        sig = signature_of(feeds) if policy.enabled else None
        if sig is None or not batchable(model.inputs, model.outputs):
            return model.infer(feeds)
        me = _Request(feeds, Pending(sig[0], sig[1], self._clock()))
        with self._cond:
            queue = self._queues.setdefault(key, _Queue(model))
            queue.items.append(me)
            self._cond.notify_all()
            while not me.done:
                batch = self._due(key, queue, policy)
                if batch is None:
                    continue
                self._cond.release()
                try:
                    self._run(name, queue.model, batch)
                finally:
                    self._cond.acquire()
                    self._cond.notify_all()
        if me.error is not None:
            raise me.error
        assert me.result is not None
        return me.result

    def _due(self, key: Hashable, queue: _Queue, policy: BatchPolicy) -> list[_Request] | None:
        """Under the lock: claim a due batch, or wait until one may be due (then None)."""
        decision = plan([r.info for r in queue.items], policy, self._clock())
        if not decision.take:
            self._cond.wait(decision.wait_s)
            return None
        chosen = set(decision.take)
        batch = [r for i, r in enumerate(queue.items) if i in chosen]
        queue.items = [r for i, r in enumerate(queue.items) if i not in chosen]
        if not queue.items:
            self._queues.pop(key, None)
        return batch

    def _run(self, name: str, model: LoadedModel, batch: list[_Request]) -> None:
        """Outside the lock: one inference for ``batch``; its error fails only its requests."""
        rows = [r.info.rows for r in batch]
        try:
            parts = split(model.infer(merge([r.feeds for r in batch])), rows)
            for r, part in zip(batch, parts, strict=True):
                r.result = part
        except (InferenceError, InvalidInputError) as exc:
            for r in batch:
                r.error = exc
        finally:  # every waiter must wake, even when something unexpected escaped
            with self._cond:
                self._stats.setdefault(name, _Stats()).record(sum(rows))
                for r in batch:
                    if r.result is None and r.error is None:
                        r.error = InferenceError("the batch failed unexpectedly: see the agent log")
                    r.done = True

    def render(self) -> str:
        """Prometheus text: batches per model and the histogram of rows per batch."""
        with self._cond:
            stats = {n: (s.batches, list(s.buckets), s.rows) for n, s in self._stats.items()}
        lines = [
            "# HELP jetfleet_batches_total Batched inferences run, per model.",
            "# TYPE jetfleet_batches_total counter",
        ]
        lines += [f'jetfleet_batches_total{{model="{n}"}} {v[0]}' for n, v in sorted(stats.items())]
        lines += [
            "# HELP jetfleet_batch_size Rows per batched inference, per model.",
            "# TYPE jetfleet_batch_size histogram",
        ]
        for n, (count, buckets, rows) in sorted(stats.items()):
            running = 0
            for bound, c in zip((*SIZE_BOUNDS, None), buckets, strict=True):
                running += c
                le = "+Inf" if bound is None else str(bound)
                lines.append(f'jetfleet_batch_size_bucket{{model="{n}",le="{le}"}} {running}')
            lines.append(f'jetfleet_batch_size_sum{{model="{n}"}} {rows}')
            lines.append(f'jetfleet_batch_size_count{{model="{n}"}} {count}')
        return "\n".join(lines) + "\n"
