"""Will a rollout's target devices be able to build the model at all?

A device whose runtime is TensorRT (its config says ``tensorrt``, or ``auto`` and TensorRT is
installed) builds one engine from the whole graph: an operator its TensorRT ONNX parser does not
support fails the build, there is no CPU fallback. The static analysis stored at push says, per
parser version, whether the model delegates fully. Pure: facts, config and analysis in, one
sentence out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.delegate import DelegateConfig


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
    facts: Mapping[str, Any] | None,
    delegate: DelegateConfig,
    analysis: Mapping[str, Any],
    model_ref: str,
) -> str | None:
    """A warning when ``device_id`` would build a TensorRT engine of a model it cannot fully run."""
    if delegate.runtime == "onnxruntime":
        return None
    trt_version = (facts or {}).get("tensorrt_version")
    family = trt_family(trt_version)
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
