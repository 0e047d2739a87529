"""One long-lived CUDA activation arena shared by every TensorRT execution context of a process.

Why: each TensorRT execution context needs activation (scratch) memory, ``device_memory_size_v2``
bytes. With the default ``STATIC`` strategy every context allocates its own with cudaMalloc at
creation and frees it when destroyed, so every swap allocates and frees a large block: on a
Jetson, where cudaMalloc carves NvMap blocks out of the DRAM shared with the CPU, that is how
memory fragments until a load fails (tensorrt-notes.md §2.4, §3). Instead, contexts are created
``USER_MANAGED`` and pointed (``set_device_memory``) at memory owned here, allocated once at the
largest size seen and grown rarely, in big steps (:func:`next_arena_size`).

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

CUDA calls go through CUDA Python (``cuda.bindings.runtime``; ``cuda.cudart`` on older releases),
imported on first use: this module imports everywhere, and :class:`CudaUnavailable` says how to
install what is missing. Tested on an NVIDIA GPU without TensorRT (``tests/gpu``) and measured by
``bench/cuda_arena.py``.
"""

from __future__ import annotations

import importlib
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

MiB = 1024 * 1024
RUNTIME_MODULES = ("cuda.bindings.runtime", "cuda.cudart")

_runtime: ModuleType | None = None


class CudaUnavailable(Exception):
    """CUDA Python is not importable or no device answers."""


class CudaError(Exception):
    """A CUDA runtime call answered an error code."""


def cudart() -> ModuleType:
    """The CUDA runtime bindings; CudaUnavailable naming the package when they do not import."""
    global _runtime
    if _runtime is not None:
        return _runtime
    errors = []
    for name in RUNTIME_MODULES:
        try:
            _runtime = importlib.import_module(name)
            return _runtime
        except ImportError as exc:
            errors.append(f"{name}: {exc}")
    raise CudaUnavailable(
        f"CUDA Python not importable ({'; '.join(errors)}): pip install cuda-python"
    )


def call(function: str, *args: Any) -> Any:
    """Run ``cudart.<function>(*args)``; CudaError with the error's name unless it succeeded."""
    rt = cudart()
    result = getattr(rt, function)(*args)
    error, values = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
    if error != rt.cudaError_t.cudaSuccess:
        raise CudaError(f"{function} failed: {getattr(error, 'name', error)}")
    return values[0] if len(values) == 1 else values


def mem_get_info() -> tuple[int, int]:
    """(free, total) bytes of the current device; CudaUnavailable without CUDA or a device."""
    try:
        free, total = call("cudaMemGetInfo")
    except CudaError as exc:
        raise CudaUnavailable(str(exc)) from exc
    return int(free), int(total)


def malloc(nbytes: int) -> int:
    """cudaMalloc (256-byte aligned, as TensorRT requires); the device pointer as an int."""
    return int(call("cudaMalloc", max(nbytes, 1)))


def free(ptr: int) -> None:
    """cudaFree."""
    call("cudaFree", ptr)


def next_arena_size(current: int, needed: int, step: int = 64 * MiB) -> int:
    """Arena size after a request for ``needed`` bytes: unchanged when it fits, else grown rarely.

    Growth at least doubles and rounds up to ``step``, so an arena that keeps meeting slightly
    larger engines reallocates O(log n) times, not once per swap.
    """
    if needed <= current:
        return current
    target = max(needed, 2 * current)
    return -(-target // step) * step


@dataclass
class Lane:
    """One region of the arena with its stream; used by one request at a time."""

    index: int
    stream: Any
    ptr: int = 0
    size: int = 0
    generation: int = 0

    @property
    def stream_handle(self) -> int:
        return int(self.stream)


class ActivationArena:
    """``lanes`` activation regions with their streams; see the module docstring."""

    def __init__(self, lanes: int = 1, step: int = 64 * MiB, initial: int = 0) -> None:
        if lanes < 1:
            raise ValueError("an arena needs at least one lane")
        self.step = step
        self.grows = 0
        self._size = 0
        self._generation = 0
        self._lock = threading.Lock()
        self._lanes = [Lane(i, call("cudaStreamCreate")) for i in range(lanes)]
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
                        free(lane.ptr)
                        lane.ptr = 0
                for lane in taken:
                    lane.ptr = malloc(new_size)
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
    def lane(self, timeout_s: float | None = None) -> Iterator[Lane]:
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
            call("cudaStreamSynchronize", lane.stream)

    def close(self) -> None:
        """Free every region and stream (waits for lanes in use)."""
        with self._lock:
            taken = [self._free.get() for _ in self._lanes]
            for lane in taken:
                if lane.ptr:
                    free(lane.ptr)
                    lane.ptr, lane.size = 0, 0
                call("cudaStreamDestroy", lane.stream)
            self._size = 0
            self._lanes = []


_arenas: dict[int, ActivationArena] = {}
_arenas_lock = threading.Lock()


def shared_arena(lanes: int, device: int = 0) -> ActivationArena:
    """The process's arena for ``device`` (created on first use with ``lanes`` lanes).

    The lane count is fixed by the first caller; engines asking for more streams share them.
    """
    with _arenas_lock:
        arena = _arenas.get(device)
        if arena is None:
            arena = _arenas[device] = ActivationArena(lanes)
        return arena
