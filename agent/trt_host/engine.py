"""Deserialize a plan, describe its I/O by name, run it on user-managed activation memory.

Per release (:class:`~.versions.Capabilities.memory_mode`, tensorrt-notes.md §2.4):

- 8.x/9.x: ``create_execution_context_without_device_memory()``, then
  ``context.device_memory = ptr`` with ``engine.device_memory_size`` bytes;
- 10.0: ``create_execution_context(strategy=USER_MANAGED)`` and the same property;
- >= 10.1: ``create_execution_context(strategy=USER_MANAGED)``, then
  ``context.set_device_memory(ptr, size)`` with ``engine.device_memory_size_v2`` bytes.

``set_input_shape`` answering False raises :class:`EngineError` with TensorRT's own logged words.
Copies go through the :mod:`.cudart` binding (passed in, so the conformance suite can record
them) with named ``cudaMemcpyKind`` constants. Device buffers grow only, so steady serving
allocates nothing. One :class:`Context` serves one request at a time (its stream and buffers
are its own); :meth:`Engine.close` drops contexts before the engine (§2.8).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from . import cudart as cuda
from . import plan_header
from .dtypes import to_numpy
from .trt_logger import make_logger
from .versions import MEMORY_V1_PROPERTY, MEMORY_V2, Capabilities


class EngineError(RuntimeError):
    """TensorRT refused the plan, a shape or a run; the message carries its own words."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    is_input: bool
    shape: Tuple[int, ...]
    dtype: np.dtype[Any]


def _reason(logger: Any) -> str:
    return "; ".join(logger.take_errors()) or "no reason logged"


class Engine:
    """One deserialized engine; :meth:`context` makes execution contexts on it."""

    def __init__(
        self,
        trt: Any,
        caps: Capabilities,
        cuda_rt: Any,
        plan: bytes,
        dla_core: Optional[int] = None,
    ) -> None:
        self.trt, self.caps, self.cuda = trt, caps, cuda_rt
        try:  # on 8.5 too: its own plans never read as >= 8.6 (plan_header), a newer one does
            plan_header.check(plan, caps.version)
        except plan_header.PlanMismatch as exc:
            raise EngineError(str(exc)) from exc
        self.logger = make_logger(trt)
        self.runtime = trt.Runtime(self.logger)
        if dla_core is not None:
            self.runtime.DLA_core = int(dla_core)
        engine = self.runtime.deserialize_cuda_engine(plan)
        if engine is None:
            raise EngineError("TensorRT refused the plan: " + _reason(self.logger))
        self.engine: Any = engine
        self.contexts: List[Context] = []
        tensors: List[TensorInfo] = []
        for i in range(int(engine.num_io_tensors)):
            name = str(engine.get_tensor_name(i))
            is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            shape = tuple(int(d) for d in engine.get_tensor_shape(name))
            tensors.append(
                TensorInfo(name, is_input, shape, to_numpy(engine.get_tensor_dtype(name), name))
            )
        self.tensors = tuple(tensors)

    @property
    def inputs(self) -> Tuple[TensorInfo, ...]:
        return tuple(t for t in self.tensors if t.is_input)

    @property
    def outputs(self) -> Tuple[TensorInfo, ...]:
        return tuple(t for t in self.tensors if not t.is_input)

    @property
    def activation_bytes(self) -> int:
        """Activation memory a context needs (max over profiles)."""
        if self.caps.memory_mode == MEMORY_V2:
            return int(self.engine.device_memory_size_v2)
        return int(self.engine.device_memory_size)

    @property
    def refittable(self) -> bool:
        return bool(self.engine.refittable)

    def new_context(self) -> Any:
        """A raw execution context that allocates no activation memory of its own."""
        if self.caps.memory_mode == MEMORY_V1_PROPERTY:
            ctx = self.engine.create_execution_context_without_device_memory()
        else:
            strategy = self.trt.ExecutionContextAllocationStrategy.USER_MANAGED
            ctx = self.engine.create_execution_context(strategy=strategy)
        if ctx is None:
            raise EngineError(
                "TensorRT could not create an execution context: " + _reason(self.logger)
            )
        return ctx

    def bind_memory(self, ctx: Any, ptr: int, size: int) -> None:
        """Point ``ctx`` at ``size`` bytes of activation memory at ``ptr`` (256-byte aligned)."""
        if self.caps.memory_mode == MEMORY_V2:
            ctx.set_device_memory(ptr, size)
        else:
            ctx.device_memory = ptr

    def context(self) -> Context:
        made = Context(self)
        self.contexts.append(made)
        return made

    def close(self) -> None:
        """Contexts first, then the engine (tensorrt-notes.md §2.8); the runtime last."""
        for ctx in self.contexts:
            ctx.close()
        self.contexts = []
        gc.collect()
        self.engine = None
        gc.collect()


class Context:
    """One execution context with its own activation memory, stream and grow-only buffers."""

    def __init__(self, engine: Engine) -> None:
        self.owner = engine
        self.cuda = engine.cuda
        self.ctx: Any = engine.new_context()
        self.activation_size = max(engine.activation_bytes, 256)
        self.activation = int(self.cuda.malloc(self.activation_size))
        engine.bind_memory(self.ctx, self.activation, self.activation_size)
        self.stream = int(self.cuda.stream_create())
        self.buffers: Dict[str, Tuple[int, int]] = {}

    def _buffer(self, name: str, nbytes: int) -> int:
        ptr, size = self.buffers.get(name, (0, 0))
        if nbytes > size:
            if ptr:
                self.cuda.free(ptr)
            size = max(int(nbytes), 256)
            ptr = int(self.cuda.malloc(size))
            self.buffers[name] = (ptr, size)
        return ptr

    def set_shapes(self, shapes: Mapping[str, Tuple[int, ...]]) -> None:
        """``set_input_shape`` for each input; EngineError with TensorRT's words when refused."""
        for name, shape in shapes.items():
            if not self.ctx.set_input_shape(name, tuple(int(d) for d in shape)):
                raise EngineError(
                    "input %r shape %s refused by TensorRT: %s"
                    % (name, tuple(shape), _reason(self.owner.logger))
                )

    def infer(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """Copy ``feeds`` in, run, copy every output back; waits for the stream."""
        engine = self.owner
        hosts: Dict[str, np.ndarray] = {}
        for info in engine.inputs:
            if info.name not in feeds:
                raise EngineError("input %r missing from the request" % info.name)
            hosts[info.name] = np.ascontiguousarray(feeds[info.name], dtype=info.dtype)
        self.set_shapes({name: host.shape for name, host in hosts.items()})
        for name, host in hosts.items():
            ptr = self._buffer(name, host.nbytes)
            self.cuda.memcpy_async(
                ptr, host.ctypes.data, host.nbytes, cuda.MEMCPY_HOST_TO_DEVICE, self.stream
            )
            self._bind(name, ptr)
        results: Dict[str, np.ndarray] = {}
        for info in engine.outputs:
            out = np.empty(tuple(int(d) for d in self.ctx.get_tensor_shape(info.name)), info.dtype)
            self._bind(info.name, self._buffer(info.name, out.nbytes))
            results[info.name] = out
        if not self.ctx.execute_async_v3(stream_handle=self.stream):
            raise EngineError("TensorRT execute_async_v3 failed: " + _reason(engine.logger))
        for name, out in results.items():
            ptr = self.buffers[name][0]
            self.cuda.memcpy_async(
                out.ctypes.data, ptr, out.nbytes, cuda.MEMCPY_DEVICE_TO_HOST, self.stream
            )
        self.cuda.stream_synchronize(self.stream)
        return results

    def _bind(self, name: str, ptr: int) -> None:
        """``set_tensor_address``, whose False (a misaligned or refused address) used to surface
        as a generic execute failure (issue 31 #4)."""
        if not self.ctx.set_tensor_address(name, ptr):
            raise EngineError(
                "TensorRT refused the address of tensor %r: %s" % (name, _reason(self.owner.logger))
            )

    def drop(self) -> bool:
        """Drop the TensorRT context and free the I/O buffers (False when already dropped)."""
        if self.ctx is None:
            return False
        self.cuda.stream_synchronize(self.stream)
        self.ctx = None
        gc.collect()
        for ptr, _ in self.buffers.values():
            self.cuda.free(ptr)
        self.buffers = {}
        return True

    def close(self) -> None:
        """:meth:`drop`, then free this context's own activation memory and stream."""
        if self.drop():
            self.cuda.free(self.activation)
            self.cuda.stream_destroy(self.stream)


def load(
    trt: Any, caps: Capabilities, cuda_rt: Any, plan: bytes, dla_core: Optional[int] = None
) -> Engine:
    """Deserialize ``plan``; EngineError with TensorRT's own words when refused."""
    return Engine(trt, caps, cuda_rt, plan, dla_core)
