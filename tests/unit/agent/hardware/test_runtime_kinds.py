"""The runtime descriptors: one entry per runtime, and the questions the agent asks of them."""

from __future__ import annotations

import importlib.util

import pytest

from agent.engines.build_runner import BUILDERS
from agent.engines.identity import IdentityError, identify
from agent.hardware.runtime_kinds import (
    ONNXRUNTIME,
    RUNTIMES,
    TENSORRT,
    UnknownRuntime,
    runtime_kind,
)
from agent.jobs.tuning_bench import BenchHost, unavailable
from agent.runtimes.loading import LOADERS
from agent.swap.admission import Admission
from agent.swap.headroom import MemorySnapshot
from shared.delegate import DelegateConfig
from shared.facts import DeviceFacts
from shared.jobs import parse_candidate

FACTS = DeviceFacts(hostname="h", os="Debian 12", arch="x86_64", onnxruntime_version="1.20.1")


def test_every_runtime_has_a_builder_module_and_a_loader() -> None:
    assert set(RUNTIMES) == {"onnxruntime", "tensorrt"}
    assert set(BUILDERS) == set(RUNTIMES) == set(LOADERS)
    for kind in RUNTIMES.values():
        assert importlib.util.find_spec(kind.builder) is not None, kind.builder
        assert runtime_kind(kind.name) is kind


def test_an_unknown_runtime_is_refused_with_the_known_names() -> None:
    with pytest.raises(UnknownRuntime, match="unknown runtime 'tflite': use one of onnxruntime"):
        runtime_kind("tflite")
    with pytest.raises(IdentityError, match="unknown runtime 'tflite'"):
        identify("tflite", FACTS, "a" * 64, DelegateConfig())


def test_admission_counts_onnx_runtime_activations_as_large_as_the_model() -> None:
    assert ONNXRUNTIME.activation_estimate(10_000_000) == 10_000_000
    assert TENSORRT.activation_estimate(10_000_000) == 0


def test_only_tensorrt_needs_a_cuda_device_and_takes_calibration_caches() -> None:
    assert (TENSORRT.needs_cuda_device, ONNXRUNTIME.needs_cuda_device) == (True, False)
    assert (TENSORRT.calibration_caches, ONNXRUNTIME.calibration_caches) == (True, False)


def test_the_engine_identity_takes_its_validity_from_the_descriptor() -> None:
    identity = identify("onnxruntime", FACTS, "a" * 64, DelegateConfig())
    assert identity.validity == ONNXRUNTIME.validity(FACTS, DelegateConfig())
    assert identity.validity.runtime == "onnxruntime"


def bench_host(runtime: str, providers: tuple[str, ...] = ("CPUExecutionProvider",)) -> BenchHost:
    return BenchHost(
        runtime=runtime,
        admit=lambda need: Admission("warm", "fits", 0, 0, 0),
        snapshot=lambda: MemorySnapshot(available_bytes=None),
        available_providers=lambda: list(providers),
    )


def test_a_tuning_candidate_of_another_runtime_is_unavailable_in_words() -> None:
    assert unavailable(parse_candidate("fp16"), bench_host("onnxruntime")) == (
        "not available on this device: TensorRT candidates need the tensorrt runtime "
        "(this agent runs onnxruntime)"
    )
    assert unavailable(parse_candidate("ort-basic"), bench_host("tensorrt")) == (
        "not available on this device: ONNX Runtime candidates need the onnxruntime runtime "
        "(this agent runs tensorrt)"
    )
    assert unavailable(parse_candidate("ort-basic+ep=cuda"), bench_host("onnxruntime")) == (
        "not available on this device: this ONNX Runtime has no CUDAExecutionProvider"
    )
    assert unavailable(parse_candidate("ort-basic"), bench_host("onnxruntime")) is None
