"""Deserialize a plan, describe its I/O by name, run it on user-managed activation memory.

Per release (:class:`~.versions.Capabilities.memory_mode`, docs/tensorrt.md#activation-memory):

- 8.x/9.x: ``create_execution_context_without_device_memory()``, then
  ``context.device_memory = ptr`` with ``engine.device_memory_size`` bytes;
- 10.0: ``create_execution_context(strategy=USER_MANAGED)`` and the same property;
- >= 10.1: ``create_execution_context(strategy=USER_MANAGED)``, then
  ``context.set_device_memory(ptr, size)`` with ``engine.device_memory_size_v2`` bytes.

Engines with data-dependent output shapes (NonZero, NonMaxSuppression): such an output is sized
by TensorRT through an ``IOutputAllocator`` (:mod:`.output_alloc`) and answered in the shape the
run notified, ``[0, ...]`` included. Where TensorRT cannot create a context on user-managed
memory for an engine (8.6.0 logged ``vector::_M_range_check`` for engines with
NonMaxSuppression), its contexts are created with ``create_execution_context()``
instead, TensorRT allocating their activation memory itself (said on stderr, and by
:attr:`Engine.self_managed`).

``set_input_shape`` answering False raises :class:`EngineError` with TensorRT's own logged words.
Copies go through the :mod:`.cudart` binding (passed in, so the conformance suite can record
them) with named ``cudaMemcpyKind`` constants. Device buffers grow only, so steady serving
allocates nothing. One :class:`Context` serves one request at a time (its stream and buffers
are its own); :meth:`Engine.close` drops contexts before the engine
(docs/tensorrt.md#object-lifetime).
"""

from __future__ import annotations

import gc
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

import numpy as np

from . import cudart as cuda
from . import plan_header
from .dtypes import to_numpy
from .output_alloc import make_allocator
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
        self.self_managed = False
        """True once TensorRT refused a context on user-managed memory: contexts own theirs."""
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

    def _user_managed_context(self) -> Tuple[Any, str]:
        """A context without activation memory of its own, or (None, TensorRT's reason)."""
        try:
            if self.caps.memory_mode == MEMORY_V1_PROPERTY:
                ctx = self.engine.create_execution_context_without_device_memory()
            else:
                strategy = self.trt.ExecutionContextAllocationStrategy.USER_MANAGED
                ctx = self.engine.create_execution_context(strategy=strategy)
        except (RuntimeError, IndexError) as exc:  # pybind11's std::exception, std::out_of_range
            return None, "%s: %s" % (type(exc).__name__, exc)
        return ctx, "" if ctx is not None else _reason(self.logger)

    def new_context(self) -> Any:
        """A raw execution context that allocates no activation memory of its own where TensorRT
        allows it; else one that does (:attr:`self_managed`)."""
        self.logger.begin()  # TensorRT's errors from here on are this context's
        if not self.self_managed:
            ctx, why = self._user_managed_context()
            if ctx is not None:
                return ctx
            print(
                "trt host: TensorRT could not create an execution context on user-managed "
                "memory (%s); this engine's contexts allocate their own activation memory" % why,
                file=sys.stderr,
            )
            self.self_managed = True
        ctx = self.engine.create_execution_context()
        if ctx is None:
            raise EngineError(
                "TensorRT could not create an execution context: " + _reason(self.logger)
            )
        return ctx

    def bind_memory(self, ctx: Any, ptr: int, size: int) -> None:
        """Point ``ctx`` at ``size`` bytes of activation memory at ``ptr`` (256-byte aligned);
        nothing for contexts that own theirs."""
        if self.self_managed:
            return
        if self.caps.memory_mode == MEMORY_V2:
            ctx.set_device_memory(ptr, size)
        else:
            ctx.device_memory = ptr

    def context(self) -> Context:
        made = Context(self)
        self.contexts.append(made)
        return made

    def close(self) -> None:
        """Contexts first, then the engine (docs/tensorrt.md#object-lifetime); the runtime last."""
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
        self.activation_size = 0 if engine.self_managed else max(engine.activation_bytes, 256)
        self.activation = int(self.cuda.malloc(self.activation_size)) if self.activation_size else 0
        engine.bind_memory(self.ctx, self.activation, self.activation_size)
        self.stream = int(self.cuda.stream_create())
        self.buffers: Dict[str, Tuple[int, int]] = {}
        self.allocator: Any = None
        self.data_dependent: Set[str] = set()

    def _buffer(self, name: str, nbytes: int) -> int:
        ptr, size = self.buffers.get(name, (0, 0))
        if nbytes > size or not ptr:  # an empty tensor still gets an address
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
        engine.logger.begin()  # this run's errors, not another lane's
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
        sized: Dict[str, np.ndarray] = {}
        by_tensorrt: List[TensorInfo] = []
        for info in engine.outputs:
            shape = tuple(int(d) for d in self.ctx.get_tensor_shape(info.name))
            if info.name in self.data_dependent or any(d < 0 for d in shape):
                # data-dependent: TensorRT sizes it during the run. Once seen, always: after a
                # run, 8.5.2 answers get_tensor_shape with that run's shape, not -1
                self.data_dependent.add(info.name)
                self._allocate_by_tensorrt(info.name)
                by_tensorrt.append(info)
                continue
            out = np.empty(shape, info.dtype)
            self._bind(info.name, self._buffer(info.name, out.nbytes))
            sized[info.name] = out
        if not self.ctx.execute_async_v3(stream_handle=self.stream):
            raise EngineError("TensorRT execute_async_v3 failed: " + _reason(engine.logger))
        copies = [(out, self.buffers[name][0]) for name, out in sized.items()]
        if by_tensorrt:
            self.cuda.stream_synchronize(self.stream)  # the notified shapes are final now
            for info in by_tensorrt:
                out = np.empty(self._notified_shape(info.name), info.dtype)
                copies.append((out, self.allocator.buffers.get(info.name, (0, 0))[0]))
                sized[info.name] = out
        for out, ptr in copies:
            if out.nbytes:
                self.cuda.memcpy_async(
                    out.ctypes.data, ptr, out.nbytes, cuda.MEMCPY_DEVICE_TO_HOST, self.stream
                )
        self.cuda.stream_synchronize(self.stream)
        return {info.name: sized[info.name] for info in engine.outputs}

    def _allocate_by_tensorrt(self, name: str) -> None:
        """Hand output ``name`` to this context's ``IOutputAllocator`` (made on first need)."""
        if self.allocator is None:
            self.allocator = make_allocator(self.owner.trt, self.cuda.malloc, self.cuda.free)
        self.allocator.shapes.pop(name, None)
        if not self.ctx.set_output_allocator(name, self.allocator):
            raise EngineError(
                "TensorRT refused an output allocator for %r: %s"
                % (name, _reason(self.owner.logger))
            )

    def _notified_shape(self, name: str) -> Tuple[int, ...]:
        shape: Optional[Tuple[int, ...]] = self.allocator.shapes.get(name)
        if shape is None or any(d < 0 for d in shape):
            raise EngineError(
                "TensorRT did not say the shape of output %r after the run: %s"
                % (name, _reason(self.owner.logger))
            )
        return shape

    def _bind(self, name: str, ptr: int) -> None:
        """``set_tensor_address``, whose False (a misaligned or refused address) used to surface
        as a generic execute failure."""
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
        if self.allocator is not None:
            self.allocator.release()
            self.allocator = None
        return True

    def close(self) -> None:
        """:meth:`drop`, then free this context's own activation memory and stream."""
        if self.drop():
            if self.activation:
                self.cuda.free(self.activation)
            self.cuda.stream_destroy(self.stream)


def load(
    trt: Any, caps: Capabilities, cuda_rt: Any, plan: bytes, dla_core: Optional[int] = None
) -> Engine:
    """Deserialize ``plan``; EngineError with TensorRT's own words when refused."""
    return Engine(trt, caps, cuda_rt, plan, dla_core)
