"""On-device jobs: profiling and delegate tuning requests, their progress and their results.

Jobs travel to a device inside its desired document (``DesiredState.jobs``): the controller cannot
reach an agent's HTTP port, and a device may only subscribe to its own ``desired`` topic. The agent
runs each ``job_id`` once and answers with events of kind ``job_progress`` and ``job_result``
whose ``data`` is a :class:`JobProgress` or a :class:`JobOutcome`; the controller drops a
finished job from the next desired document.

Tuning candidates are short names an operator types (``fp16``, ``fp16+dla0``, ``ort-basic``,
``threads=2``, ``ep=trt``); :func:`parse_candidate` reads them and :func:`candidate_delegate` turns
one into the delegate config it benchmarks. :func:`recommend` picks the fastest candidate whose
outputs stayed within its precision's tolerance of the reference outputs. Pure: pydantic only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from shared.delegate import DelegateConfig, OrtOptLevel, OrtProvider, Precision
from shared.manifests import ArtifactRef
from shared.wire_model import MODEL_NAME_PATTERN, VERSION_PATTERN, WireModel

JOB_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{2,39}$"
"""Job ids name a directory on the device, so they are one safe path component."""

MAX_CANDIDATES = 32
ProcessingUnit = Literal["GPU", "DLA", "CPU"]


JobArtifact = ArtifactRef
"""Where the device fetches a job's bytes (a model, its reference outputs): a model slot's
:class:`~shared.manifests.ArtifactRef`, whose ``signed`` manifest an agent with a pinned fleet key
requires."""


class ProfileJob(WireModel):
    """Profile the active engine of one served model: time per operator or layer."""

    kind: Literal["profile"] = "profile"
    job_id: str = Field(pattern=JOB_ID_PATTERN)
    model: str = Field(
        pattern=MODEL_NAME_PATTERN, description="The slot whose active engine to profile."
    )
    runs: int = Field(default=20, ge=1, le=10_000, description="Profiled inferences.")
    warmups: int = Field(
        default=2, ge=0, le=1_000, description="Inferences before timing (left out of the result)."
    )


class TuneJob(WireModel):
    """Build, benchmark and validate candidate delegate configs of one model version."""

    kind: Literal["tune"] = "tune"
    job_id: str = Field(pattern=JOB_ID_PATTERN)
    model: str = Field(pattern=MODEL_NAME_PATTERN)
    version: str = Field(pattern=VERSION_PATTERN)
    artifact: JobArtifact
    reference: JobArtifact | None = Field(
        default=None, description="The version's reference outputs (NPZ), as a slot carries them."
    )
    base: DelegateConfig = Field(
        default_factory=DelegateConfig,
        description="The config resolved for the device; each candidate changes some fields.",
    )
    candidates: tuple[str, ...] = Field(min_length=1, max_length=MAX_CANDIDATES)
    power_modes: tuple[str, ...] = Field(
        default=(), description="nvpmodel modes to benchmark under; empty = the current mode."
    )
    runs: int = Field(default=50, ge=1, le=100_000, description="Timed inferences per candidate.")
    warmups: int = Field(default=5, ge=0, le=10_000, description="Untimed inferences first.")


Job = Annotated[ProfileJob | TuneJob, Field(discriminator="kind")]
"""One job in a desired document."""


# --- results ---------------------------------------------------------------------------------


class OpTime(WireModel):
    """Time spent in one operator type on one processing unit, over the profiled runs."""

    op_type: str
    device: ProcessingUnit
    provider: str = Field(description="ONNX Runtime execution provider, or tensorrt.")
    calls: int = Field(ge=0)
    total_ms: float = Field(ge=0)
    share: float = Field(ge=0, le=1, description="Share of the time of every node (0-1).")


class LayerTime(WireModel):
    """Time spent in one node (ONNX Runtime) or layer (TensorRT), over the profiled runs."""

    name: str
    op_type: str
    device: ProcessingUnit
    total_ms: float = Field(ge=0)
    share: float = Field(ge=0, le=1)


class ProfileResult(WireModel):
    """Where the time of one model's inference goes on one device."""

    model: str
    version: str | None = None
    runtime: str
    engine_key: str | None = None
    source: Literal["onnxruntime-profiler", "tensorrt-iprofiler"]
    runs: int = Field(ge=0, description="Runs the numbers cover (warm-ups left out).")
    total_ms: float = Field(ge=0, description="Time in nodes or layers over those runs.")
    per_run_ms: float = Field(ge=0)
    device_shares: dict[str, float] = Field(
        default_factory=dict, description="Share of the time per processing unit (GPU, DLA, CPU)."
    )
    ops: tuple[OpTime, ...] = Field(default=(), description="Top operator types, slowest first.")
    layers: tuple[LayerTime, ...] = Field(default=(), description="Top nodes, slowest first.")


class Accuracy(WireModel):
    """A candidate's outputs against the reference, at its precision's tolerance."""

    checked: str = Field(description="What was compared, e.g. '4 reference case(s) at fp16'.")
    max_abs_diff: float | None = None
    min_cosine: float | None = None
    min_top1: float | None = Field(default=None, description="Top-1 agreement, for class outputs.")
    within_tolerance: bool
    problems: tuple[str, ...] = ()


CandidateStatus = Literal["ok", "failed", "unavailable", "skipped"]


class CandidateResult(WireModel):
    """One row of a tuning table: a candidate benchmarked (or why not) under one power mode."""

    name: str
    power_mode: str | None = None
    status: CandidateStatus
    reason: str | None = Field(default=None, description="Why it failed or did not run.")
    runtime: str | None = None
    precision: str | None = None
    threads: int | None = None
    build_s: float | None = None
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    latency_mean_ms: float | None = None
    throughput_ips: float | None = Field(default=None, description="Inferences per second.")
    memory_bytes: int | None = Field(default=None, description="Memory the loaded engine took.")
    accuracy: Accuracy | None = None

    @property
    def label(self) -> str:
        """``name`` or ``name@power_mode``."""
        return self.name if self.power_mode is None else f"{self.name}@{self.power_mode}"


class TuneResult(WireModel):
    """The tuning table of one model version on one device."""

    model: str
    version: str
    runtime: str = Field(description="The runtime the agent serves with.")
    runs: int
    candidates: tuple[CandidateResult, ...]


class JobProgress(WireModel):
    """``data`` of a ``job_progress`` event: a step finished (a candidate's row, for tuning)."""

    job_id: str = Field(pattern=JOB_ID_PATTERN)
    job_kind: Literal["profile", "tune"]
    step: int = Field(ge=0)
    steps: int = Field(ge=1)
    detail: str = Field(description="What the step did, for people.")
    candidate: CandidateResult | None = None


class JobOutcome(WireModel):
    """``data`` of a ``job_result`` event: the job finished, with its result or why it failed."""

    job_id: str = Field(pattern=JOB_ID_PATTERN)
    job_kind: Literal["profile", "tune"]
    status: Literal["succeeded", "failed"]
    error: str | None = None
    profile: ProfileResult | None = None
    tune: TuneResult | None = None


# --- candidates ------------------------------------------------------------------------------

_PRECISIONS: tuple[Precision, ...] = ("fp32", "fp16", "int8", "best")
_LEVELS: tuple[OrtOptLevel, ...] = ("disable", "basic", "extended", "all")
EXECUTION_PROVIDERS: dict[str, tuple[OrtProvider, ...]] = {
    "trt": ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"),
    "cuda": ("CUDAExecutionProvider", "CPUExecutionProvider"),
    "cpu": ("CPUExecutionProvider",),
}
_DLA = re.compile(r"^dla(\d{1,2})$")
CANDIDATE_HELP = (
    "use fp32, fp16, int8, best, dlaN (TensorRT), ort-disable|basic|extended|all, threads=N, "
    "ep=trt|cuda|cpu (ONNX Runtime), joined by '+', e.g. fp16+dla0 or ort-basic+threads=2"
)


class CandidateError(ValueError):
    """A candidate name that cannot be read; the message says which part and what is allowed."""


@dataclass(frozen=True)
class CandidateSpec:
    """What one candidate name asks for."""

    name: str
    runtime: Literal["onnxruntime", "tensorrt"]
    precision: Precision | None = None
    dla_core: int | None = None
    opt_level: OrtOptLevel | None = None
    threads: int | None = None
    ep: str | None = None


def _set(found: dict[str, Any], key: str, value: Any, token: str, name: str) -> None:
    if key in found:
        raise CandidateError(f"candidate {name!r}: {token!r} repeats the {key} already given")
    found[key] = value


def parse_candidate(name: str) -> CandidateSpec:
    """Read one candidate name; CandidateError saying what is wrong and what is allowed."""
    text = name.strip()
    if not text:
        raise CandidateError(f"empty candidate name: {CANDIDATE_HELP}")
    found: dict[str, Any] = {}
    for token in text.split("+"):
        dla = _DLA.match(token)
        if token in _PRECISIONS:
            _set(found, "precision", token, token, text)
        elif dla:
            _set(found, "dla_core", int(dla.group(1)), token, text)
        elif token.startswith("ort-") and token[4:] in _LEVELS:
            _set(found, "opt_level", token[4:], token, text)
        elif token.startswith("threads="):
            raw = token.partition("=")[2]
            if not raw.isdigit() or not 1 <= int(raw) <= 64:
                raise CandidateError(f"candidate {text!r}: {token!r} needs 1-64 threads")
            _set(found, "threads", int(raw), token, text)
        elif token.startswith("ep="):
            ep = token.partition("=")[2]
            if ep not in EXECUTION_PROVIDERS:
                raise CandidateError(f"candidate {text!r}: {token!r} is not trt, cuda or cpu")
            _set(found, "ep", ep, token, text)
        else:
            raise CandidateError(f"candidate {text!r}: unknown part {token!r}; {CANDIDATE_HELP}")
    ort = any(k in found for k in ("opt_level", "threads", "ep"))
    runtime: Literal["onnxruntime", "tensorrt"] = "onnxruntime" if ort else "tensorrt"
    if ort and found.get("ep") != "trt":
        for key in ("precision", "dla_core"):
            if key in found and not (key == "precision" and found[key] == "fp32"):
                raise CandidateError(
                    f"candidate {text!r}: {key} on ONNX Runtime needs its TensorRT provider "
                    "(add ep=trt) or drop the ort-/threads= parts to use TensorRT itself"
                )
    if "dla_core" in found and "precision" not in found:
        found["precision"] = "fp16"
    if found.get("dla_core") is not None and found.get("precision") == "fp32":
        raise CandidateError(f"candidate {text!r}: the DLA runs fp16 or int8, not fp32")
    return CandidateSpec(name=text, runtime=runtime, **found)


def parse_candidates(names: Sequence[str]) -> list[CandidateSpec]:
    """Every candidate of a tune request, in order; CandidateError on the first bad or repeated."""
    specs: list[CandidateSpec] = []
    for name in names:
        spec = parse_candidate(name)
        if any(s.name == spec.name for s in specs):
            raise CandidateError(f"candidate {spec.name!r} is given twice")
        specs.append(spec)
    if not specs:
        raise CandidateError(f"no candidates: {CANDIDATE_HELP}")
    if len(specs) > MAX_CANDIDATES:
        raise CandidateError(f"{len(specs)} candidates; at most {MAX_CANDIDATES} per tune")
    return specs


def candidate_layer(spec: CandidateSpec) -> dict[str, Any]:
    """The delegate-config values the candidate sets (what ``tune --apply`` stores).

    ``threads`` is a serving setting, not a delegate-config field, so it is not among them.
    """
    values: dict[str, Any] = {"runtime": spec.runtime}
    if spec.runtime == "tensorrt":
        values["precision"] = spec.precision or "fp32"
        values["dla_core"] = spec.dla_core
        return values
    ort: dict[str, Any] = {}
    if spec.opt_level is not None:
        ort["graph_optimization_level"] = spec.opt_level
    if spec.ep is not None:
        ort["providers"] = list(EXECUTION_PROVIDERS[spec.ep])
    if spec.precision is not None:
        values["precision"] = spec.precision
    if spec.dla_core is not None:
        values["dla_core"] = spec.dla_core
    if ort:
        values["onnxruntime"] = ort
    return values


def candidate_delegate(spec: CandidateSpec, base: DelegateConfig) -> DelegateConfig:
    """``base`` with the candidate's fields set: the config the device builds and benchmarks."""
    values = candidate_layer(spec)
    ort = values.pop("onnxruntime", {})
    merged = base.model_dump(mode="json")
    merged.update(values)
    merged["onnxruntime"] = {**merged["onnxruntime"], **ort}
    return DelegateConfig.model_validate(merged)


# --- recommendation --------------------------------------------------------------------------


@dataclass(frozen=True)
class Recommendation:
    """The candidate to use (None when none qualifies) and one line saying why."""

    candidate: str | None
    reason: str


def recommend(rows: Sequence[CandidateResult]) -> Recommendation:
    """The fastest candidate (lowest p50) that ran and stayed within its tolerance.

    A faster candidate whose outputs left its precision's tolerance is never chosen; the reason
    names it, so the operator sees what the accuracy cost would have been.
    """
    ran = [r for r in rows if r.status == "ok" and r.latency_p50_ms is not None]
    good = [r for r in ran if r.accuracy is not None and r.accuracy.within_tolerance]
    if not good:
        if not ran:
            return Recommendation(None, "no candidate ran")
        return Recommendation(None, "no candidate stayed within its precision's tolerance")
    best = min(good, key=lambda r: r.latency_p50_ms or 0.0)
    best_ms = best.latency_p50_ms or 0.0
    faster = [r.label for r in ran if r not in good and (r.latency_p50_ms or 0.0) < best_ms]
    reason = f"fastest within tolerance: {best.label} (p50 {best_ms:.3f} ms)"
    if faster:
        reason += f"; faster but outside tolerance: {', '.join(faster)}"
    return Recommendation(best.label, reason)
