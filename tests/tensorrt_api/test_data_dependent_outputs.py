"""Outputs sized by TensorRT (NonZero, NonMaxSuppression) and contexts TensorRT must allocate
for, per release: which names the host touches, with which arguments.

The shapes below are scripted inputs of the stand-in; real TensorRT's answers for such engines
are checked by ``tests/tensorrt/test_model_families.py`` on the GPU test host.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from agent.trt_host.engine import load
from agent.trt_host.versions import Capabilities
from tests.tensorrt_api.conftest import RecordingCuda
from tests.tensorrt_api.scenes import engine_with_two_inputs, feeds
from tests.tensorrt_api.standin import StandIn

pytestmark = pytest.mark.tensorrt_api

V1 = ("8.5.2", "8.6.1")


def _data_dependent_out(s: StandIn, rows: int) -> None:
    """``out`` reads (-1, 3) after set_input_shape; the run reallocates it and notifies."""
    engine_with_two_inputs(s)
    s.script(
        "IExecutionContext.get_tensor_shape",
        lambda self, n: (-1, 3) if n == "out" else (2, 3, 16, 16),
    )

    def execute(self: Any, **kwargs: Any) -> bool:
        for call in s.recorder.calls("IExecutionContext.set_output_allocator"):
            name, allocator = call.args
            allocator.reallocate_output(name, 0, rows * 3 * 4, 256)
            allocator.notify_shape(name, (rows, 3))
        return True

    s.script("IExecutionContext.execute_async_v3", execute)


@pytest.mark.parametrize("rows", [5, 0])
def test_a_data_dependent_output_is_sized_by_an_output_allocator(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda, rows: int
) -> None:
    _data_dependent_out(standin, rows)
    context = load(standin.module, caps, cuda, b"plan bytes").context()
    outputs = context.infer(feeds())
    rec = standin.recorder
    allocators = rec.calls("IExecutionContext.set_output_allocator")
    assert [c.args[0] for c in allocators] == ["out"]
    assert isinstance(allocators[0].args[1], standin.module.IOutputAllocator)
    assert "out" not in [c.args[0] for c in rec.calls("IExecutionContext.set_tensor_address")]
    assert outputs["out"].shape == (rows, 3)  # what the run notified, zero rows included
    assert outputs["out"].dtype == np.float32


def test_the_allocators_buffers_are_freed_with_the_context(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda
) -> None:
    _data_dependent_out(standin, 4)
    engine = load(standin.module, caps, cuda, b"plan bytes")
    context = engine.context()
    context.infer(feeds())
    allocator = context.allocator
    assert allocator.buffers
    engine.close()
    assert not allocator.buffers
    assert context.allocator is None


def test_a_context_refused_on_user_managed_memory_is_made_with_its_own(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda, release: str
) -> None:
    engine_with_two_inputs(standin)
    trt = standin.module

    def refuse(self: Any, **kwargs: Any) -> Any:
        if release in V1 or kwargs:  # the user-managed way of each release
            logger = standin.recorder.calls("Runtime.__init__")[-1].args[0]
            logger.log(trt.ILogger.Severity.ERROR, "std::exception: vector::_M_range_check")
            return None
        return standin.make("IExecutionContext")

    standin.script("ICudaEngine.create_execution_context_without_device_memory", refuse)
    standin.script(
        "ICudaEngine.create_execution_context",
        lambda self, **k: None if k else standin.make("IExecutionContext"),
    )
    engine = load(trt, caps, cuda, b"plan bytes")
    first, second = engine.context(), engine.context()
    assert engine.self_managed
    rec = standin.recorder
    plain = [c for c in rec.calls("ICudaEngine.create_execution_context") if not c.kwargs]
    assert len(plain) == 2  # both contexts made by TensorRT's own allocation
    assert not rec.sets("IExecutionContext.device_memory")
    assert not rec.calls("IExecutionContext.set_device_memory")
    assert first.activation == 0
    assert second.activation == 0
    assert set(first.infer(feeds())) == {"out"}


def test_an_output_once_sized_by_tensorrt_stays_so_when_a_later_shape_reads_concrete(
    standin: StandIn, caps: Capabilities, cuda: RecordingCuda
) -> None:
    """8.5.2 answers ``get_tensor_shape`` after a run with that run's shape: the next run must
    not take it for the output's size (it was taken so on real 8.5.2: one row instead of 30)."""
    rows = [5]
    _data_dependent_out(standin, 5)
    ran = [False]
    standin.script(
        "IExecutionContext.get_tensor_shape",
        lambda self, n: ((rows[0], 3) if ran[0] else (-1, 3)) if n == "out" else (2, 3, 16, 16),
    )

    def execute(self: Any, **kwargs: Any) -> bool:
        name, allocator = standin.recorder.calls("IExecutionContext.set_output_allocator")[-1].args
        allocator.reallocate_output(name, 0, rows[0] * 12, 256)
        allocator.notify_shape(name, (rows[0], 3))
        ran[0] = True
        return True

    standin.script("IExecutionContext.execute_async_v3", execute)
    context = load(standin.module, caps, cuda, b"plan bytes").context()
    assert context.infer(feeds())["out"].shape == (5, 3)
    rows[0] = 0  # the next input keeps nothing; get_tensor_shape still says (5, 3) before the run
    standin.script(
        "IExecutionContext.get_tensor_shape",
        lambda self, n: (5, 3) if n == "out" else (2, 3, 16, 16),
    )
    assert context.infer(feeds())["out"].shape == (0, 3)
    assert len(standin.recorder.calls("IExecutionContext.set_output_allocator")) == 2
