"""Outputs whose shape only the run knows (NonZero, NonMaxSuppression): sized by TensorRT.

After ``set_input_shape`` such an output still reads ``-1`` in ``context.get_tensor_shape``
(a *data-dependent* shape): no buffer can be sized for it beforehand. TensorRT's answer, from
8.5 on, is ``IOutputAllocator``: during ``execute_async_v3`` it calls ``reallocate_output(name,
memory, size, alignment)`` for a buffer of ``size`` bytes and ``notify_shape(name, dims)`` with
the shape the run produced (both before ``execute_async_v3`` returns: NVIDIA's C++ API,
``IOutputAllocator``).
The Python bindings of 8.5.2, 8.6 and 10.x let a subclass override exactly those two
(``python/src/infer/pyCore.cpp`` at each tag: 10.x's ``reallocate_output_async`` falls back to
``reallocate_output`` when it is not overridden), so one class serves every release.

Buffers grow only, like a context's other I/O buffers, and are at least 256 bytes, so a run with
zero detections (``size`` 0) still gets a valid address and answers shape ``[0, ...]``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple


def make_allocator(trt: Any, malloc: Callable[[int], int], free: Callable[[int], None]) -> Any:
    """A ``trt.IOutputAllocator`` with grow-only device buffers (``malloc``/``free`` from the
    host's CUDA runtime); ``.shapes[name]`` is the last shape TensorRT notified."""

    class GrowOnlyAllocator(trt.IOutputAllocator):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.IOutputAllocator.__init__(self)
            self.buffers: Dict[str, Tuple[int, int]] = {}
            self.shapes: Dict[str, Tuple[int, ...]] = {}

        def reallocate_output(
            self, tensor_name: str, memory: int, size: int, alignment: int
        ) -> int:
            ptr, have = self.buffers.get(tensor_name, (0, 0))
            if int(size) > have or not ptr:
                if ptr:
                    free(ptr)
                have = max(int(size), 256)
                ptr = int(malloc(have))  # cudaMalloc: 256-byte aligned, enough for any alignment
                self.buffers[tensor_name] = (ptr, have)
            return ptr

        def notify_shape(self, tensor_name: str, shape: Any) -> None:
            self.shapes[tensor_name] = tuple(int(d) for d in shape)

        def release(self) -> None:
            for ptr, _ in self.buffers.values():
                free(ptr)
            self.buffers = {}

    return GrowOnlyAllocator()
