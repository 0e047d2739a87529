"""Which target devices cannot build a model with their runtime (pure)."""

import pytest

from controller.rollouts.delegation import delegation_warning, trt_family
from shared.delegate import DelegateConfig
from shared.facts import DeviceFacts

PARTIAL = {"verdict": {"kind": "partial", "line": "partial: 2 partitions, 2 crossings"}}
FULL = {"verdict": {"kind": "full", "line": "full delegation: 1 partition"}}
ANALYSIS = {"8.5": PARTIAL, "8.6": FULL, "10.1": PARTIAL}


def trt(version: str | None) -> DeviceFacts:
    """The facts of an x86_64 gateway with TensorRT ``version`` (None: without TensorRT)."""
    return DeviceFacts(hostname="gw-1", os="Ubuntu 22.04", arch="x86_64", tensorrt_version=version)


@pytest.mark.parametrize(
    ("version", "family"),
    [("10.3.0.30", "10.1"), ("8.6.2", "8.6"), ("8.5.2.2", "8.5"), ("7.1.3", None), (None, None)],
)
def test_tensorrt_versions_map_to_the_parser_table(version: str | None, family: str | None) -> None:
    assert trt_family(version) == family


def test_a_tensorrt_device_that_cannot_run_every_op_is_warned_about() -> None:
    warning = delegation_warning("gw-1", trt("10.3.0.30"), DelegateConfig(), ANALYSIS, "det:2")
    assert warning is not None
    assert warning.startswith("gw-1: TensorRT 10.3.0.30 cannot run all of det:2 (partial: 2")
    assert "no CPU fallback" in warning


@pytest.mark.parametrize(
    ("facts", "config"),
    [
        (trt("8.6.2"), DelegateConfig()),  # 8.6 parser takes it all
        (trt("10.3.0.30"), DelegateConfig(runtime="onnxruntime")),  # EP fallback
        (trt(None), DelegateConfig()),  # no TensorRT: ONNX Runtime on the CPU
        (None, DelegateConfig(runtime="tensorrt")),  # facts unknown: nothing to say
    ],
)
def test_no_warning_where_the_device_can_build_or_falls_back(
    facts: DeviceFacts | None, config: DelegateConfig
) -> None:
    assert delegation_warning("gw-1", facts, config, ANALYSIS, "det:2") is None


@pytest.mark.parametrize(
    ("state", "error", "needle"),
    [
        ("pending", None, "is still pending: cannot tell whether TensorRT 10.3.0.30 can run"),
        ("failed", "it did not finish within 120 s", "failed (it did not finish within 120 s)"),
    ],
)
def test_a_tensorrt_device_is_warned_about_while_the_analysis_is_unknown(
    state: str, error: str | None, needle: str
) -> None:
    # The analysis runs after the push; until it is done nobody knows the verdict.
    warning = delegation_warning(
        "gw-1",
        trt("10.3.0.30"),
        DelegateConfig(),
        {},
        "det:2",
        analysis_state=state,
        analysis_error=error,
    )
    assert warning is not None
    assert warning.startswith("gw-1: the static analysis of det:2 ")
    assert needle in warning


def test_an_unknown_analysis_says_nothing_about_devices_without_tensorrt() -> None:
    onnxruntime = DelegateConfig(runtime="onnxruntime")
    for facts, config in [(trt(None), DelegateConfig()), (None, onnxruntime)]:
        assert (
            delegation_warning("gw-1", facts, config, {}, "det:2", analysis_state="pending") is None
        )


def recurrent_analysis() -> dict[str, object]:
    """What the controller stores for a model whose parser verdict is full and that holds an
    LSTM at the top and a GRU in a Loop body."""
    report = {
        "verdict": {"kind": "full", "line": "full delegation: 1 partition"},
        "histogram": [{"op_type": "LSTM", "count": 1, "supported": 1}],
        "subgraph_nodes": [{"path": "Loop_1/body/GRU_0", "op_type": "GRU"}],
    }
    return {"8.5": report, "8.6": report, "10.1": report}


@pytest.mark.parametrize(
    ("version", "disabled"),
    [
        ("8.5.2.2", ["CUBLAS", "CUBLAS_LT", "CUDNN"]),
        ("8.5.2.2", ["CUBLAS", "CUBLAS_LT"]),
        ("8.5.2.2", []),
        ("8.6.2", ["CUBLAS", "CUBLAS_LT", "CUDNN"]),
        ("10.3.0.30", ["CUBLAS", "CUBLAS_LT"]),
    ],
)
def test_disabled_tactic_sources_raise_no_warning_for_a_fully_delegated_model(
    version: str, disabled: list[str]
) -> None:
    """Real TensorRT 8.5.2 and 8.6.0 build recurrent loops with any of these sources off
    (tests/tensorrt/test_model_families.py), so a rollout must not tell the operator otherwise."""
    for fallback in ("onnxruntime", "none"):
        config = DelegateConfig.model_validate(
            {"disabled_tactic_sources": disabled, "fallback": fallback}
        )
        warning = delegation_warning("gw-1", trt(version), config, recurrent_analysis(), "vad:3")
        assert warning is None
