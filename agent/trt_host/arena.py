"""One long-lived activation arena shared by every TensorRT execution context of a host.

Why: each execution context needs activation (scratch) memory. Left to TensorRT, every context
allocates its own with cudaMalloc at creation and frees it when destroyed, so every swap allocates
and frees a large block: on a Jetson, where cudaMalloc carves NvMap blocks out of the DRAM shared
with the CPU, that is how memory fragments until a load fails (docs/tensorrt.md#activation-memory,
#memory-on-a-jetson). Instead, contexts are made without memory of their own (:mod:`.engine`) and
pointed at memory owned here, allocated once at the largest size seen and grown rarely, in big steps
(:func:`next_arena_size`).

**Lanes.** TensorRT forbids two contexts that run in parallel from sharing activation memory,
but contexts that run *one after another on one stream* may share it (NVIDIA/TensorRT#3276). So
the arena is ``lanes`` regions, each with its own CUDA stream and lock. An engine that serves
``streams`` concurrent requests has one context per lane; a request borrows a free lane, and
every context of every engine that uses lane *i* uses lane *i*'s memory, serialised by its lock.
During a warm swap the old and the new engine both have contexts on each lane and share its
memory: the swap allocates no activation memory at all unless the new engine is the largest yet.

**Growth** takes every lane (waiting for the requests on them), frees the old regions, allocates
the new ones, and bumps ``generation``; a context rebinds its memory before its next run when it
sees a newer generation. Growth at least doubles, rounded up to ``step`` bytes.

CUDA calls go through :class:`.cudart.CudaRuntime` (passed in, so the conformance suite can
record them). Moved here from the agent's former ``agent/runtimes/cuda_arena.py``:
the agent no longer calls CUDA. Python 3.8 syntax, standard library only.
"""

from __future__ import annotations

import queue
import threading
from contextlib import contextmanager
from typing import Any, Iterator, List, Optional

MiB = 1024 * 1024


def next_arena_size(current: int, needed: int, step: int = 64 * MiB) -> int:
    """Arena size after a request for ``needed`` bytes: unchanged when it fits, else grown rarely.

    Growth at least doubles and rounds up to ``step``, so an arena that keeps meeting slightly
    larger engines reallocates O(log n) times, not once per swap.
    """
    if needed <= current:
        return current
    target = max(needed, 2 * current)
    return -(-target // step) * step


class Lane:
    """One region of the arena with its stream; used by one request at a time."""

    def __init__(self, index: int, stream: int) -> None:
        self.index = index
        self.stream = stream
        self.ptr = 0
        self.size = 0
        self.generation = 0


class ActivationArena:
    """``lanes`` activation regions with their streams over ``cuda`` (a CudaRuntime)."""

    def __init__(self, cuda: Any, lanes: int = 1, step: int = 64 * MiB, initial: int = 0) -> None:
        if lanes < 1:
            raise ValueError("an arena needs at least one lane")
        self.cuda = cuda
        self.step = step
        self.grows = 0
        self._size = 0
        self._generation = 0
        self._lock = threading.Lock()
        self._lanes: List[Lane] = [Lane(i, int(cuda.stream_create())) for i in range(lanes)]
        self._free: queue.Queue[Lane] = queue.Queue()
        for lane in self._lanes:
            self._free.put(lane)
        if initial:
            self.reserve(initial)

    @property
    def size(self) -> int:
        """Bytes per lane."""
        return self._size

    @property
    def lanes(self) -> int:
        return len(self._lanes)

    def stream(self, index: int) -> int:
        """Lane ``index``'s CUDA stream (a context made for that lane runs on it)."""
        return self._lanes[index].stream

    @property
    def total_bytes(self) -> int:
        return self._size * len(self._lanes)

    def reserve(self, needed: int) -> bool:
        """Make every lane at least ``needed`` bytes; True when that reallocated the arena."""
        with self._lock:
            if needed <= self._size:
                return False
            new_size = next_arena_size(self._size, needed, self.step)
            taken = [self._free.get() for _ in self._lanes]
            try:
                for lane in taken:
                    if lane.ptr:
                        self.cuda.free(lane.ptr)
                        lane.ptr = 0
                for lane in taken:
                    lane.ptr = int(self.cuda.malloc(new_size))
                    lane.size = new_size
                    lane.generation = self._generation + 1
                self._size = new_size
                self._generation += 1
                self.grows += 1
            finally:
                for lane in taken:
                    self._free.put(lane)
            return True

    @contextmanager
    def lane(self, timeout_s: Optional[float] = None) -> Iterator[Lane]:
        """Borrow a free lane for one request (blocks while all are busy)."""
        try:
            lane = self._free.get(timeout=timeout_s)
        except queue.Empty as exc:
            raise TimeoutError("no free arena lane: every stream is busy") from exc
        try:
            yield lane
        finally:
            self._free.put(lane)

    def synchronize(self) -> None:
        """Wait for the work queued on every lane's stream."""
        for lane in self._lanes:
            self.cuda.stream_synchronize(lane.stream)

    def close(self) -> None:
        """Free every region and stream (waits for lanes in use)."""
        with self._lock:
            taken = [self._free.get() for _ in self._lanes]
            for lane in taken:
                if lane.ptr:
                    self.cuda.free(lane.ptr)
                    lane.ptr, lane.size = 0, 0
                self.cuda.stream_destroy(lane.stream)
            self._size = 0
            self._lanes = []
