"""The TensorRT host's activation arena (agent/trt_host/arena.py) on a real NVIDIA GPU.

Moved from tests/gpu/test_cuda_arena.py with the arena: same intent, now over the
host's ctypes libcudart binding. Marked ``gpu``: skips with the reason where libcudart or a
device is missing. No TensorRT needed.
"""

from __future__ import annotations

import threading

import pytest

from agent.trt_host import cudart
from agent.trt_host.arena import ActivationArena, MiB

pytestmark = pytest.mark.gpu

try:
    RT = cudart.CudaRuntime()
    RT.device_count()
except cudart.CudaUnavailable as exc:
    pytest.skip(f"no CUDA device through libcudart: {exc}", allow_module_level=True)


def test_arena_grows_rarely_and_returns_device_memory_on_close() -> None:
    free_before, _ = RT.mem_get_info()
    arena = ActivationArena(RT, lanes=2)
    for needed in (10 * MiB, 60 * MiB, 64 * MiB, 65 * MiB, 100 * MiB, 30 * MiB):
        arena.reserve(needed)
    assert arena.size == 128 * MiB
    assert arena.grows == 2
    with arena.lane() as lane:
        assert lane.ptr != 0
        assert lane.size == 128 * MiB
    arena.close()
    free_after, _ = RT.mem_get_info()
    assert abs(free_after - free_before) < 64 * MiB


def test_a_thousand_simulated_swaps_allocate_nothing_after_warm_up() -> None:
    arena = ActivationArena(RT, lanes=1, initial=256 * MiB)
    free_start, _ = RT.mem_get_info()
    for i in range(1000):
        arena.reserve((100 + (i % 2) * 50) * MiB)
    free_end, _ = RT.mem_get_info()
    assert arena.grows == 1
    assert free_end == free_start
    arena.close()


def test_lanes_serialise_requests_per_lane() -> None:
    arena = ActivationArena(RT, lanes=2, initial=64 * MiB)
    inside, peak, lock = [0], [0], threading.Lock()

    def request() -> None:
        with arena.lane():
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            threading.Event().wait(0.01)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=request) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 2
    arena.close()
