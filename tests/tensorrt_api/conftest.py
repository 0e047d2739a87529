"""Fixtures of the TensorRT API conformance suite: one generated stand-in per release.

:class:`RecordingCuda` is the suite's one non-TensorRT stand-in: it takes the place of
:class:`agent.trt_host.cudart.CudaRuntime` (passed to the engine as a parameter) and records the
calls; libcudart itself is exercised for real on the GPU host by tests/gpu/test_cudart.py.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from agent.trt_host.versions import Capabilities
from tests.tensorrt_api.standin import RELEASES, VERSIONS, StandIn, load_rows

_ROWS = load_rows()


class RecordingCuda:
    """Device pointers are counters; every call is recorded as (name, args)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self._next = 0x1000

    def malloc(self, nbytes: int) -> int:
        self._next += 0x10000
        self.calls.append(("malloc", (nbytes,)))
        return self._next

    def free(self, ptr: int) -> None:
        self.calls.append(("free", (ptr,)))

    def memcpy_async(self, dst: int, src: int, nbytes: int, kind: Any, stream: int) -> None:
        self.calls.append(("memcpy_async", (dst, src, nbytes, kind, stream)))

    def stream_create(self) -> int:
        self.calls.append(("stream_create", ()))
        return 0xBEEF

    def stream_synchronize(self, stream: int) -> None:
        self.calls.append(("stream_synchronize", (stream,)))

    def stream_destroy(self, stream: int) -> None:
        self.calls.append(("stream_destroy", (stream,)))

    def copy_kinds(self) -> list[Any]:
        return [args[3] for name, args in self.calls if name == "memcpy_async"]


def is_named_kind(kind: Any) -> bool:
    return isinstance(kind, ctypes.c_int)


@pytest.fixture(params=RELEASES)
def release(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def standin(release: str) -> StandIn:
    return StandIn(release, _ROWS)


@pytest.fixture
def caps(release: str) -> Capabilities:
    return Capabilities.for_version(VERSIONS[release])


@pytest.fixture
def cuda() -> RecordingCuda:
    return RecordingCuda()
