"""Every model family serves on real TensorRT: built, or fallen back to ONNX Runtime for reasons
TensorRT gives, and the answers match the controller's reference outputs.

Each family of :mod:`tests.model_families` goes the agent's way: the controller's reference
outputs for the shapes and inputs an operator pushes (``reference_npz`` with ``--shape`` and
``--inputs``), the delegate config the controller resolves (its default shape profile from those
shapes), the agent's TensorRT build child (:func:`agent.engines.build_runner.run_build`, which
prepares the model for TensorRT first), the TensorRT host, and the agent's validation; where the
build, the load or the validation fails, :func:`agent.slots.fallback.fallback_reason` must call it
a fallback and ONNX Runtime (the fallback's providers) must then pass the same validation. A model
that serves on neither fails the test: ``failed`` stays 0.

With ``JETFLEET_FAMILY_RESULTS`` set to a file, one JSON line per model is appended (release,
outcome, reason, build seconds, the analyzer's prediction) for ``bench/model_families.py``.

Marked ``tensorrt``: skips with the reason where no TensorRT interpreter and CUDA device exist.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from agent.engines.build_protocol import BuildRequest
from agent.engines.build_runner import BUILDERS, run_build
from agent.errors import AgentError
from agent.runtimes.loading import load_engine
from agent.slots.fallback import fallback_delegate, fallback_reason
from agent.swap.hotswap import ValidationFailed
from agent.swap.validation import parse_reference, validate
from controller.analysis.reference_outputs import reference_npz
from controller.analysis.report import analyze
from shared.default_profile import default_profiles
from shared.delegate import DelegateConfig
from shared.warmup_inputs import WarmupSpec
from tests.model_families import RECURRENT_GATES, FamilyModel, families, feeds, recurrent

pytestmark = pytest.mark.tensorrt

from tests.tensorrt.conftest_trt import (  # noqa: E402
    missing_tactic_libraries,
    skip_without_tensorrt,
    tensorrt_version,
)

skip_without_tensorrt()

NO_LIBRARIES = missing_tactic_libraries()
RELEASE = tensorrt_version()


def config_for(family: FamilyModel, disabled: tuple[str, ...] = NO_LIBRARIES) -> DelegateConfig:
    """What the controller resolves for a config that turns off ``disabled`` (by default the
    tactic sources whose library this host lacks; fp16 where the model's own inputs are fp16):
    its default shape profile from the pushed shapes
    (:func:`shared.default_profile.default_profiles`) for every dynamic input."""
    sample = feeds(family)
    fp16 = any(array.dtype == np.float16 for array in sample.values())
    config = DelegateConfig.model_validate(
        {"disabled_tactic_sources": disabled, "precision": "fp16" if fp16 else "fp32"}
    )
    graph = onnx.load_model_from_string(family.data).graph
    dims = {
        value.name: [d.dim_param or (d.dim_value if d.HasField("dim_value") else -1)
                     for d in value.type.tensor_type.shape.dim]
        for value in graph.input
    }  # fmt: skip
    return default_profiles(dims, config, given=family.shapes).apply(config)


def serve_on_tensorrt(
    tmp_path: Path, source: Path, config: DelegateConfig, reference: object
) -> float:
    """Build, load and validate on TensorRT as the agent does; the build's seconds."""
    request = BuildRequest(onnx_path=source, output_path=tmp_path / "engine", config=config)
    started = time.monotonic()
    try:
        built = run_build(BUILDERS["tensorrt"], request, 540)
    finally:
        seconds = time.monotonic() - started
    model = load_engine("tensorrt", built.output, delegate=config)
    try:
        report = validate(model, reference, config.precision, profile_opt=opt_of(config))  # type: ignore[arg-type]
    finally:
        model.close()
    if report.problems:
        raise ValidationFailed("; ".join(report.problems))
    return seconds


def predicted(family: FamilyModel) -> str:
    """What ``jetfleet models analyze --trt`` at this release predicts, in the outcome's words."""
    release = ".".join(RELEASE.split(".")[:2])
    report = analyze(family.data, release, use_tensorrt=False, input_shapes=family.shapes)
    assert report.prediction is not None
    return {"builds": "built", "falls_back": "fell_back"}[report.prediction.tensorrt]


def opt_of(config: DelegateConfig) -> dict[str, tuple[int, ...]]:
    return {p.input: p.opt for p in config.shapes}


def serve_or_fall_back(
    tmp_path: Path, family: FamilyModel, config: DelegateConfig
) -> tuple[str, str, float | None]:
    """(outcome, fallback reason, build seconds): built and validated on TensorRT, or fallen
    back to ONNX Runtime, which must then pass the same validation (else the test fails)."""
    source = tmp_path / "model.onnx"
    source.write_bytes(family.data)
    given = WarmupSpec(shapes=family.shapes, values=family.values)
    reference = parse_reference(reference_npz(family.data, given=given, sample=feeds(family)))
    try:
        return "built", "", serve_on_tensorrt(tmp_path, source, config, reference)
    except AgentError as exc:
        failure = exc
    why = fallback_reason(failure, config, "tensorrt")
    assert why is not None, f"TensorRT failed and the slot would not fall back: {failure}"
    model = load_engine("onnxruntime", source, delegate=fallback_delegate(config))
    try:
        report = validate(model, reference, "fp32", profile_opt=opt_of(config))
    finally:
        model.close()
    assert report.problems == [], "ONNX Runtime does not serve it either: failed"
    return "fell_back", why, None


def record(
    family: FamilyModel,
    served: tuple[str, str, float | None],
    predicted_outcome: str,
    disabled: tuple[str, ...],
) -> None:
    """Print the model's result line and append it to ``$JETFLEET_FAMILY_RESULTS`` if set."""
    outcome, reason, seconds = served
    line = {
        "tensorrt": RELEASE,
        "model": family.name,
        "family": family.family,
        "outcome": outcome,
        "reason": reason,
        "build_seconds": None if seconds is None else round(seconds, 2),
        "predicted": predicted_outcome,
        "disabled_tactic_sources": list(disabled),
    }
    print("FAMILY " + json.dumps(line))
    results = os.environ.get("JETFLEET_FAMILY_RESULTS")
    if results:
        with open(results, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


@pytest.mark.parametrize("family", families(), ids=lambda f: f.name)
def test_the_family_serves_on_tensorrt_or_falls_back_and_matches_the_reference(
    tmp_path: Path, family: FamilyModel
) -> None:
    served = serve_or_fall_back(tmp_path, family, config_for(family))
    record(family, served, predicted(family), NO_LIBRARIES)


SWITCHABLE = ("CUBLAS", "CUBLAS_LT", "CUDNN")
"""The tactic sources a memory-tight config may turn off; the telling subsets are tried in turn."""

CUBLAS_BUILDS_LOOPS = ("8.5",)
"""Releases whose builder needs NVIDIA's cuBLAS and cuDNN libraries loaded to build a recurrent
loop, whatever tactic sources are off. Seen on 8.5.2 (2026-12-07, H100, in
``bench/results/gpu-host/``): with stub libraries, "Could not find any implementation for node
{ForeignNode[...LoopOutput]}"; with real cuBLAS and a stub cuDNN, "SymbolAddress for
cudnnActivationForward could not be loaded"; with both real, built under every subset below. 8.6.0
builds the loops with stubs. Every JetPack installs both libraries."""


@pytest.mark.parametrize(
    ("op", "off"),
    [
        (op, off)
        for off in [
            (),
            SWITCHABLE,
            ("CUBLAS", "CUBLAS_LT"),
            ("CUDNN",),
            ("CUBLAS", "CUDNN"),
            ("CUBLAS_LT", "CUDNN"),
        ]
        for op in sorted(RECURRENT_GATES)
    ],
    ids=lambda value: value if isinstance(value, str) else "+".join(value) or "none",
)
def test_a_recurrent_op_builds_whatever_tactic_sources_the_config_turns_off(
    tmp_path: Path, op: str, off: tuple[str, ...]
) -> None:
    """``jetfleet models analyze`` predicts the build from the operators alone, and rollouts warn
    about no tactic source (:mod:`controller.rollouts.delegation`): the builder must then take
    each recurrent operator under each set of disabled sources. A source the host's libraries
    cannot back stays off in every build, so a set that needs it on is skipped, with that
    reason."""
    needed_on = [name for name in NO_LIBRARIES if name not in off]
    if needed_on:
        pytest.skip(f"this host has no usable library for {needed_on}: it cannot turn them on")
    release = ".".join(RELEASE.split(".")[:2])
    if release in CUBLAS_BUILDS_LOOPS and NO_LIBRARIES:
        pytest.skip(
            f"TensorRT {release} builds recurrent loops with cuBLAS and cuDNN loaded, and this "
            f"host has stubs for {list(NO_LIBRARIES)} (a JetPack has both)"
        )
    disabled = tuple(sorted(set(off) | set(NO_LIBRARIES)))
    family = recurrent(op)
    outcome, reason, seconds = serve_or_fall_back(tmp_path, family, config_for(family, disabled))
    expected = predicted(family)
    record(family, (outcome, reason, seconds), expected, disabled)
    assert expected == "built", f"the analyzer refuses {op}, which TensorRT takes"
    assert outcome == "built", f"{op} with {disabled} off: {outcome} ({reason})"
