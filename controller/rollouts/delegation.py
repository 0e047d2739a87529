"""Will a rollout's target devices be able to build the model at all?

A device whose runtime is TensorRT (its config says ``tensorrt``, or ``auto`` and TensorRT is
installed) builds one engine from the whole graph: an operator its TensorRT ONNX parser does not
support fails the build, there is no CPU fallback. The static analysis run after the push says, per
parser version, whether the model delegates fully. A config's disabled tactic sources do not
change that: on real TensorRT 8.5.2 and 8.6.0 with NVIDIA's cuBLAS and cuDNN present, recurrent
operators (the one case once suspected) build with every combination of CUBLAS, CUBLAS_LT and
CUDNN off (``tests/tensorrt/test_model_families.py``). Pure: facts, config and analysis in, one
sentence out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.delegate import DelegateConfig
from shared.facts import DeviceFacts


def trt_family(version: str | None) -> str | None:
    """The parser table a TensorRT version is checked against: 8.5, 8.6 or 10.1 (any 10.x)."""
    if not version:
        return None
    parts = version.split(".")
    if parts[0] == "8" and len(parts) > 1 and parts[1] in ("5", "6"):
        return f"8.{parts[1]}"
    if parts[0] == "10":
        return "10.1"
    return None


def delegation_warning(
    device_id: str,
    facts: DeviceFacts | None,
    delegate: DelegateConfig,
    analysis: Mapping[str, Any],
    model_ref: str,
    *,
    analysis_state: str = "done",
    analysis_error: str | None = None,
) -> str | None:
    """A warning when ``device_id`` would build a TensorRT engine of a model it cannot fully run,
    or may not: while the analysis is pending or after it failed, nobody knows yet."""
    if delegate.runtime == "onnxruntime":
        return None
    trt_version = facts.tensorrt_version if facts is not None else None
    family = trt_family(trt_version)
    if family is not None and analysis_state != "done":
        if analysis_state == "pending":
            why, then = (
                "is still pending",
                f"retry once `jetfleet models show {model_ref}` gives the verdict",
            )
        else:
            why, then = f"failed ({analysis_error})", "check it with `jetfleet models analyze FILE`"
        return (
            f"{device_id}: the static analysis of {model_ref} {why}: cannot tell whether "
            f"TensorRT {trt_version} can run all of it (runtime '{delegate.runtime}' has no CPU "
            f"fallback); {then}"
        )
    if family is None or family not in analysis:
        return None
    verdict = analysis[family]["verdict"]
    if verdict["kind"] == "full":
        return None
    return (
        f"{device_id}: TensorRT {trt_version} cannot run all of {model_ref} ({verdict['line']}) "
        f"and runtime '{delegate.runtime}' has no CPU fallback: the build will fail there; "
        "use a config with runtime onnxruntime (TensorRT execution provider) or fix the model"
    )
