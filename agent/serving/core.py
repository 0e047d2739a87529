"""The serving core: every model name has an *active* and a *standby* slot; swaps are atomic.

The swap protocol
=================

A gateway serves several models at once and replaces one of them while clients keep sending
requests. Users of Triton and DeepStream know what goes wrong there: requests fail during the
reload, or memory grows across reloads until a load fails. This module is the part of the agent
that guarantees the first never happens and makes the second measurable; the memory side
(admission, the CUDA arena, worker processes) lives in :mod:`agent.swap.admission`,
:mod:`agent.trt_host.arena` and :mod:`agent.swap.worker`, and the orchestration in
:mod:`agent.swap.hotswap`.

**Two slots per model.** A name maps to a :class:`ModelSlots`: ``active`` (the entry new
requests get) and ``standby`` (a loaded, warmed-up, validated entry waiting to be switched in).
Loading, warm-up and validation all happen on the standby, outside every lock, while the active
entry keeps serving. Nothing a client can see changes until :meth:`ModelRegistry.promote`.

**Leases, taken under the registry lock.** A request does not look up an entry and *then* use
it: :meth:`ModelRegistry.acquire` reads the active entry and increments its in-flight count in
one critical section. The switch (``promote``) takes the same lock, so a request is either
counted on the old entry before the switch or sees the new one after it: there is no window in
which a request holds an entry that nobody will wait for. A request therefore finishes on the
engine it started on, and new requests go to the new engine from the instant of the switch.

**Drain, then free, in order.** After the switch the old entry is *retired*: nothing can lease
it any more, and :meth:`ServedModel.drain` waits (with a deadline, on a condition variable)
until its in-flight count reaches zero. Only then is it closed, and the runtimes close their
execution contexts before their engine (TensorRT keeps a context's engine alive; freeing in the
other order leaks, NVIDIA/TensorRT#1072). A drain that times out still closes the entry: the
stuck request then fails, which is reported, rather than the old engine living forever.

**Cold swaps pause intake.** When old and new engines do not fit in memory together, the old one
must go first. :meth:`ModelRegistry.pause` makes new requests for that name *wait* (a bounded
queue of ``max_queue`` waiters; beyond it they get 503 at once) instead of failing; the active
entry drains and is unloaded, the new one is loaded, and :meth:`ModelRegistry.resume` (after
``promote`` of the new entry, or of the reloaded old one when the new one failed) releases the
waiters onto whichever entry is active then. A waiter that waits longer than
``pause_timeout_s`` gets 503 with a retry hint: a bounded wait, never a hang.

**Other models are never disturbed.** Every state change is per name; the registry lock is held
only for dictionary updates and counter increments (microseconds), never while loading,
validating, draining or closing.

Crash safety is not this module's job: the on-disk pointers (:mod:`agent.swap.journal`) are
written around ``promote`` by :mod:`agent.swap.hotswap`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from agent.runtimes.base import LoadedModel


class Busy(Exception):
    """More requests are waiting on a model than its ``max_queue`` allows."""


class NotServed(Exception):
    """No model of that name is being served (404)."""


@dataclass(eq=False)
class ServedModel:
    """One loaded model version and the requests currently using it."""

    name: str
    version: str
    sha256: str
    model: LoadedModel
    max_queue: int = 64
    engine_key: str | None = None
    runtime: str | None = None
    """The runtime serving it (``onnxruntime``, ``tensorrt``), for /metrics; None: unknown."""
    fallback: bool = False
    """ONNX Runtime serves it because TensorRT could not (:mod:`agent.slots.fallback`)."""
    _inflight: int = 0
    _retired: bool = False
    _closed: bool = False
    _idle: threading.Condition = field(default_factory=threading.Condition)

    @property
    def inflight(self) -> int:
        """Requests using this model now."""
        with self._idle:
            return self._inflight

    def _enter(self) -> None:
        with self._idle:
            if self._inflight >= self.max_queue:
                raise Busy(f"model {self.name!r} has {self._inflight} requests in flight")
            self._inflight += 1

    def _leave(self) -> None:
        with self._idle:
            self._inflight -= 1
            self._idle.notify_all()

    @contextmanager
    def lease(self) -> Iterator[LoadedModel]:
        """Use the model for one request; Busy when ``max_queue`` requests are in flight.

        Prefer :meth:`ModelRegistry.acquire`, which cannot race a swap.
        """
        self._enter()
        try:
            yield self.model
        finally:
            self._leave()

    def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait until no request uses this entry (up to ``timeout_s``); False if it timed out."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            self._retired = True
            while self._inflight > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._idle.wait(left)
            return self._inflight == 0

    def wait_idle(self, timeout_s: float = 30.0) -> bool:
        """Wait until no request uses this entry, without retiring it (refit under a pause)."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            while self._inflight > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
            return True

    def close(self) -> None:
        """Release the runtime (once)."""
        with self._idle:
            if self._closed:
                return
            self._closed = True
        self.model.close()

    def drain_and_close(self, timeout_s: float = 30.0) -> bool:
        """Drain (up to ``timeout_s``), then close; False if the drain timed out."""
        drained = self.drain(timeout_s)
        self.close()
        return drained


@dataclass(eq=False)
class ModelSlots:
    """One model name: the active entry, the standby one, and the intake gate."""

    name: str
    active: ServedModel | None = None
    standby: ServedModel | None = None
    paused: bool = False
    waiting: int = 0


class ModelRegistry:
    """Model name → its slots; every switch is atomic with respect to :meth:`acquire`."""

    def __init__(self, pause_timeout_s: float = 30.0) -> None:
        self._lock = threading.Condition()
        self._slots: dict[str, ModelSlots] = {}
        self.pause_timeout_s = pause_timeout_s

    # --- requests -----------------------------------------------------------------------------

    @contextmanager
    def acquire(self, name: str) -> Iterator[ServedModel]:
        """Lease the active entry of ``name`` for one request.

        NotServed when nothing serves ``name``; Busy when its queue is full or a paused intake
        did not resume within ``pause_timeout_s``.
        """
        entry = self._take(name)
        try:
            yield entry
        finally:
            entry._leave()

    def _take(self, name: str) -> ServedModel:
        deadline = time.monotonic() + self.pause_timeout_s
        with self._lock:
            slots = self._slots.get(name)
            if slots is not None and slots.paused:
                limit = slots.active.max_queue if slots.active else 64
                if slots.waiting >= limit:
                    raise Busy(f"model {name!r} is being swapped and {limit} requests wait")
                slots.waiting += 1
                try:
                    while slots.paused:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            raise Busy(f"model {name!r} is still being swapped")
                        self._lock.wait(left)
                finally:
                    slots.waiting -= 1
                slots = self._slots.get(name)
            if slots is None or slots.active is None:
                raise NotServed(f"model {name!r} is not being served")
            entry = slots.active
            entry._enter()
            return entry

    # --- the swap -----------------------------------------------------------------------------

    def get(self, name: str) -> ServedModel | None:
        """The active entry of ``name``, if any (metadata only; requests use :meth:`acquire`)."""
        with self._lock:
            slots = self._slots.get(name)
            return slots.active if slots else None

    def standby(self, name: str) -> ServedModel | None:
        """The standby entry of ``name``, if one is staged."""
        with self._lock:
            slots = self._slots.get(name)
            return slots.standby if slots else None

    def stage(self, entry: ServedModel) -> ServedModel | None:
        """Put ``entry`` in ``name``'s standby slot; return a standby it displaced (to close)."""
        with self._lock:
            slots = self._slots.setdefault(entry.name, ModelSlots(entry.name))
            old, slots.standby = slots.standby, entry
            return old

    def discard_standby(self, name: str) -> ServedModel | None:
        """Empty the standby slot (validation failed); return the entry to close."""
        with self._lock:
            slots = self._slots.get(name)
            if slots is None:
                return None
            old, slots.standby = slots.standby, None
            self._forget_if_empty(slots)
            return old

    def promote(self, name: str) -> ServedModel | None:
        """Atomically make the standby active; return the previous active entry (to drain)."""
        with self._lock:
            slots = self._slots.get(name)
            if slots is None or slots.standby is None:
                raise ValueError(f"model {name!r} has no standby entry to promote")
            old, slots.active, slots.standby = slots.active, slots.standby, None
            self._lock.notify_all()
            return old

    def swap(self, entry: ServedModel) -> ServedModel | None:
        """Stage and promote ``entry`` in one step; return the entry it replaced (to drain)."""
        with self._lock:
            self.stage(entry)
            return self.promote(entry.name)

    def pause(self, name: str) -> None:
        """Hold new requests for ``name`` in a bounded queue (cold swap)."""
        with self._lock:
            self._slots.setdefault(name, ModelSlots(name)).paused = True

    def resume(self, name: str) -> None:
        """Release the held requests onto whatever entry is active now."""
        with self._lock:
            slots = self._slots.get(name)
            if slots is not None:
                slots.paused = False
                self._forget_if_empty(slots)
            self._lock.notify_all()

    def deactivate(self, name: str) -> ServedModel | None:
        """Empty the active slot (cold swap: unload before load); return it to drain."""
        with self._lock:
            slots = self._slots.get(name)
            if slots is None:
                return None
            old, slots.active = slots.active, None
            return old

    def remove(self, name: str) -> ServedModel | None:
        """Stop serving ``name``; return its active entry (to drain and close)."""
        with self._lock:
            slots = self._slots.pop(name, None)
            self._lock.notify_all()
        if slots is None:
            return None
        if slots.standby is not None:
            slots.standby.close()
        return slots.active

    def _forget_if_empty(self, slots: ModelSlots) -> None:
        if slots.active is None and slots.standby is None and not slots.paused:
            self._slots.pop(slots.name, None)

    # --- views --------------------------------------------------------------------------------

    def versions(self) -> dict[str, str]:
        """Name → active version of everything being served."""
        with self._lock:
            return {n: s.active.version for n, s in self._slots.items() if s.active is not None}

    def entries(self) -> list[ServedModel]:
        """Every resident entry, active and standby (admission counts them all)."""
        with self._lock:
            return [e for s in self._slots.values() for e in (s.active, s.standby) if e is not None]

    def inflight(self) -> int:
        """Requests being served or held now, over every model (the queue depth)."""
        with self._lock:
            entries = [s.active for s in self._slots.values() if s.active is not None]
            waiting = sum(s.waiting for s in self._slots.values())
        return sum(entry.inflight for entry in entries) + waiting

    def close_all(self, timeout_s: float = 10.0) -> None:
        """Stop serving everything and release the runtimes."""
        with self._lock:
            slots, self._slots = list(self._slots.values()), {}
            self._lock.notify_all()
        for s in slots:
            if s.standby is not None:
                s.standby.close()
            if s.active is not None:
                s.active.drain_and_close(timeout_s)
