"""The set of models being served, by name, swapped atomically.

A new version is fully loaded and warmed up before :meth:`ModelRegistry.swap` publishes it; a
request holds a lease on the entry it started with, so it finishes on the old version while new
requests already see the new one. The old entry is closed once its last lease is returned.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from agent.runtime import LoadedModel


class Busy(Exception):
    """More requests are waiting on a model than its ``max_queue`` allows."""


@dataclass(eq=False)
class ServedModel:
    """One loaded model version and the requests currently using it."""

    name: str
    version: str
    sha256: str
    model: LoadedModel
    max_queue: int = 64
    _inflight: int = 0
    _idle: threading.Condition = field(default_factory=threading.Condition)

    @property
    def inflight(self) -> int:
        """Requests using this model now."""
        with self._idle:
            return self._inflight

    @contextmanager
    def lease(self) -> Iterator[LoadedModel]:
        """Use the model for one request; Busy when ``max_queue`` requests are in flight."""
        with self._idle:
            if self._inflight >= self.max_queue:
                raise Busy(f"model {self.name!r} has {self._inflight} requests in flight")
            self._inflight += 1
        try:
            yield self.model
        finally:
            with self._idle:
                self._inflight -= 1
                self._idle.notify_all()

    def drain_and_close(self, timeout_s: float = 30.0) -> bool:
        """Wait for in-flight requests (up to ``timeout_s``), then close; False if it timed out."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            while self._inflight > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._idle.wait(left)
            drained = self._inflight == 0
        self.model.close()
        return drained


class ModelRegistry:
    """Model name → the entry serving it now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: dict[str, ServedModel] = {}

    def get(self, name: str) -> ServedModel | None:
        """The entry serving ``name``, if any."""
        with self._lock:
            return self._models.get(name)

    def swap(self, entry: ServedModel) -> ServedModel | None:
        """Serve ``entry`` from now on; return the entry it replaced (to drain and close)."""
        with self._lock:
            old = self._models.get(entry.name)
            self._models[entry.name] = entry
            return old

    def remove(self, name: str) -> ServedModel | None:
        """Stop serving ``name``; return its entry (to drain and close)."""
        with self._lock:
            return self._models.pop(name, None)

    def versions(self) -> dict[str, str]:
        """Name → version of everything being served."""
        with self._lock:
            return {name: entry.version for name, entry in self._models.items()}

    def inflight(self) -> int:
        """Requests being served now, over every model (the telemetry's queue depth)."""
        with self._lock:
            entries = list(self._models.values())
        return sum(entry.inflight for entry in entries)

    def close_all(self, timeout_s: float = 10.0) -> None:
        """Stop serving everything and release the runtimes."""
        with self._lock:
            entries, self._models = list(self._models.values()), {}
        for entry in entries:
            entry.drain_and_close(timeout_s)
