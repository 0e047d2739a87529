"""Fixtures for the agent <-> TensorRT host transport: real host processes on ONNX Runtime."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import onnx
import pytest

from agent.runtimes.host import HostConfig, TrtHost
from agent.trt_host import shm
from controller.demo.sample_models import classifier

FAST = HostConfig(first_backoff_s=0.05, max_backoff_s=0.5, start_timeout_s=60.0)
"""Restart backoff short enough for tests; everything else as the agent runs it."""


class Call(threading.Thread):
    """``fn()`` on a thread; ``result`` or ``error`` once joined."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:
            self.error = exc

    def outcome(self) -> BaseException | None:
        self.join(60)
        assert not self.is_alive()
        return self.error


def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0, what: str = "") -> None:
    """Poll ``condition`` until it holds; fail the test when ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what or condition}")
        time.sleep(0.01)


def regions(prefix: str) -> list[str]:
    """The /dev/shm files whose name starts with ``prefix``."""
    return sorted(n for n in os.listdir(shm.SHM_DIR) if n.startswith(prefix))


def classifier_at(size: int, batch: int | str = 1) -> bytes:
    """The demo classifier (conv + global pooling, any spatial size) with a 1x3xSIZExSIZE input;
    ``batch="N"`` makes the batch dimension dynamic."""
    model = onnx.load_from_string(classifier())
    dims = model.graph.input[0].type.tensor_type.shape.dim
    for dim, value in zip(dims, (batch, 3, size, size), strict=True):
        if isinstance(value, str):
            dim.dim_param = value
        else:
            dim.dim_value = value
    out = model.graph.output[0].type.tensor_type.shape.dim[0]
    if isinstance(batch, str):
        out.dim_param = batch
    onnx.checker.check_model(model)
    return model.SerializeToString()


@pytest.fixture
def models(tmp_path: Path) -> dict[str, Path]:
    paths = {
        "classifier": tmp_path / "classifier.onnx",
        "classifier224": tmp_path / "classifier224.onnx",
        "batched": tmp_path / "batched.onnx",
    }
    paths["classifier"].write_bytes(classifier())
    paths["classifier224"].write_bytes(classifier_at(224))
    paths["batched"].write_bytes(classifier_at(32, batch="N"))
    return paths


@pytest.fixture
def host() -> Iterator[TrtHost]:
    started = TrtHost(FAST, name="test-host").start()
    yield started
    started.close()
