"""Which TensorRT failures make a slot fall back to ONNX Runtime: the model's (its
parser refusal, an unsupported layer, a build child dead by a signal, a stuck build, no execution
context, outputs off the reference), not the device's (memory, space, the network, stopping)."""

from __future__ import annotations

import pytest

from agent.engines.build_runner import BuildFailed, exit_summary
from agent.errors import DownloadError, ModelLoadError, StateDirError
from agent.slots.fallback import REASON_CHARS, fallback_delegate, fallback_reason
from agent.swap.hotswap import AdmissionRefused, ValidationFailed
from shared.delegate import DelegateConfig

DEFAULT = DelegateConfig()


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (
            BuildFailed(
                "agent.trt_host.build_child exited 1",
                [
                    "[E] ModelImporter.cpp:771: IIfConditionalOutputLayer inputs must have "
                    "the same shape"
                ],
            ),
            "IIfConditionalOutputLayer inputs must have the same shape",
        ),
        (
            BuildFailed(
                exit_summary("agent.trt_host.build_child", -11), ["parsing node 812 (NonZero)"]
            ),
            "killed by SIGSEGV",
        ),
        (BuildFailed("build timed out after 1800 s and was killed", []), "timed out"),
        (
            ModelLoadError(
                "TensorRT could not create an execution context: vector::_M_range_check"
            ),
            "execution context",
        ),
        (ValidationFailed("output 'boxes' differs from the reference by 0.31"), "reference"),
        (BuildFailed("TensorRT build refused", ["no Python here can import tensorrt"]), "refused"),
    ],
)
def test_the_models_failures_fall_back_in_tensorrts_words(error: Exception, words: str) -> None:
    reason = fallback_reason(error, DEFAULT, "tensorrt")  # type: ignore[arg-type]
    assert reason is not None
    assert words in reason


@pytest.mark.parametrize(
    "error",
    [
        BuildFailed("agent.trt_host.build_child exited 1", ["Cuda Runtime (out of memory)"]),
        BuildFailed(exit_summary("agent.trt_host.build_child", -9), []),  # the OOM killer
        BuildFailed("build cancelled: the agent is stopping", []),
        ModelLoadError("std::bad_alloc while deserialising the plan"),
        AdmissionRefused("classifier 2: needs 900 MiB, 300 MiB free"),
        StateDirError("cannot write the state directory (No space left on device)"),
        DownloadError("connection refused"),
    ],
)
def test_the_devices_failures_do_not_fall_back(error: Exception) -> None:
    assert fallback_reason(error, DEFAULT, "tensorrt") is None  # type: ignore[arg-type]


def test_fallback_none_and_onnxruntime_devices_never_fall_back() -> None:
    refused = BuildFailed("agent.trt_host.build_child exited 1", ["unsupported layer"])
    assert fallback_reason(refused, DelegateConfig(fallback="none"), "tensorrt") is None
    assert fallback_reason(refused, DEFAULT, "onnxruntime") is None


def test_a_long_message_is_cut_to_what_a_slot_reports() -> None:
    refused = BuildFailed("agent.trt_host.build_child exited 1", ["x" * 5000])
    reason = fallback_reason(refused, DEFAULT, "tensorrt")
    assert reason is not None
    assert len(reason) == REASON_CHARS
    assert reason.endswith("…")


def test_a_fallback_runs_on_cuda_where_onnxruntime_has_it_unless_the_config_chose() -> None:
    chosen = fallback_delegate(DEFAULT).onnxruntime.providers
    assert chosen == ("CUDAExecutionProvider", "CPUExecutionProvider")
    assert "TensorrtExecutionProvider" not in chosen  # TensorRT in the agent's own process
    picked = DelegateConfig.model_validate(
        {"onnxruntime": {"providers": ["TensorrtExecutionProvider", "CPUExecutionProvider"]}}
    )
    assert fallback_delegate(picked) == picked
