"""Which failed TensorRT builds the engine store remembers for the twins: the model's,
not this device's (memory, space, stopping, a build refused before it started here)."""

from __future__ import annotations

import pytest

from agent.engines.build_failures import REASON_CHARS, remembered, words
from agent.engines.build_runner import BuildFailed, exit_summary


@pytest.mark.parametrize(
    "failure",
    [
        BuildFailed("agent.trt_host.build_child exited 1", ["[E] INVALID_NODE: NonZero"]),
        BuildFailed(exit_summary("agent.trt_host.build_child", -11), []),
        BuildFailed("build timed out after 1800 s and was killed", []),
    ],
)
def test_the_models_failures_are_remembered(failure: BuildFailed) -> None:
    assert remembered(failure)


@pytest.mark.parametrize(
    "failure",
    [
        BuildFailed("TensorRT build refused", ["no Python here can import tensorrt"]),
        BuildFailed("agent.trt_host.build_child exited 1", ["Cuda Runtime (out of memory)"]),
        BuildFailed(exit_summary("agent.trt_host.build_child", -9), []),  # OOM killer
        BuildFailed("build cancelled: the agent is stopping", []),
    ],
)
def test_this_devices_failures_are_not(failure: BuildFailed) -> None:
    assert not remembered(failure)


def test_the_words_kept_are_tensorrts_and_bounded() -> None:
    failure = BuildFailed("agent.trt_host.build_child exited 1", ["parse error", "in node 7"])
    assert words(failure) == "agent.trt_host.build_child exited 1: in node 7; parse error"
    long = BuildFailed("agent.trt_host.build_child exited 1", ["x" * 5000])
    assert len(words(long)) == REASON_CHARS
