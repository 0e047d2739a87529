"""The TensorRT host's ctypes libcudart binding on a real NVIDIA GPU (no TensorRT needed).

Marked ``gpu``: skips with the reason where libcudart or a device is missing.
"""

from __future__ import annotations

import numpy as np
import pytest

from agent.trt_host import cudart

pytestmark = pytest.mark.gpu

try:
    RT = cudart.CudaRuntime()
    RT.device_count()
except cudart.CudaUnavailable as exc:
    pytest.skip(f"no CUDA device through libcudart: {exc}", allow_module_level=True)


def test_versions_and_memory_info() -> None:
    assert RT.runtime_version() >= 11000
    assert RT.driver_version() >= RT.runtime_version() // 1000 * 1000 - 1000
    free, total = RT.mem_get_info()
    assert 0 < free <= total


def test_malloc_memcpy_round_trip_and_free() -> None:
    host = np.arange(1 << 20, dtype=np.float32)
    back = np.zeros_like(host)
    ptr = RT.malloc(host.nbytes)
    other = RT.malloc(host.nbytes)
    stream = RT.stream_create()
    try:
        RT.memcpy_async(ptr, host.ctypes.data, host.nbytes, cudart.MEMCPY_HOST_TO_DEVICE, stream)
        RT.memcpy_async(other, ptr, host.nbytes, cudart.MEMCPY_DEVICE_TO_DEVICE, stream)
        RT.memcpy_async(back.ctypes.data, other, host.nbytes, cudart.MEMCPY_DEVICE_TO_HOST, stream)
        RT.stream_synchronize(stream)
    finally:
        RT.free(ptr)
        RT.free(other)
        RT.stream_destroy(stream)
    np.testing.assert_array_equal(back, host)


def test_a_failing_call_names_cudas_error() -> None:
    with pytest.raises(cudart.CudaError, match=r"cudaErrorMemoryAllocation|out of memory"):
        RT.malloc(1 << 60)
