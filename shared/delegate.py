"""Delegate config: how one model is handed to the accelerator on one device.

The knobs follow trtexec and the GPU delegates operators know
(docs/tensorrt.md#delegate-config-knobs): precision (or strong typing), DLA core and GPU fallback,
workspace, builder optimisation level, shape profiles, auxiliary streams, execution contexts, timing
cache, INT8 calibration cache, power mode and clocks, a serving preference, and the ONNX Runtime
options for the CPU/GPU-EP path. :func:`check_config` finds the mistakes that can be found before a
build (pure; the controller calls it with the model's inputs and the device's DLA count).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Precision = Literal["fp32", "fp16", "int8", "best"]
Runtime = Literal["auto", "onnxruntime", "tensorrt"]
Fallback = Literal["onnxruntime", "none"]
Preference = Literal["sustained_throughput", "lowest_latency"]
OrtProvider = Literal["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
OrtOptLevel = Literal["disable", "basic", "extended", "all"]
TacticSource = Literal["CUBLAS", "CUBLAS_LT", "CUDNN", "EDGE_MASK_CONVOLUTIONS", "JIT_CONVOLUTIONS"]
"""TensorRT's ``TacticSource`` names; cuBLAS/cuDNN ones: deprecated in 10.x, gone after 10.13."""

Dim = int | str
"""A tensor dimension: a size, or a symbolic name for a dynamic one (-1 also means dynamic)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ShapeProfile(_Frozen):
    """Min/opt/max shape of one dynamic input (a TensorRT optimisation profile)."""

    input: str = Field(description="Input tensor name.")
    min: tuple[int, ...] = Field(description="Smallest shape the engine accepts.")
    opt: tuple[int, ...] = Field(description="Shape the kernels are tuned for.")
    max: tuple[int, ...] = Field(description="Largest shape the engine accepts.")

    @model_validator(mode="after")
    def _ordered(self) -> ShapeProfile:
        if not len(self.min) == len(self.opt) == len(self.max):
            raise ValueError(f"shape profile {self.input!r}: min, opt and max need the same rank")
        for lo, mid, hi in zip(self.min, self.opt, self.max, strict=True):
            if not 0 < lo <= mid <= hi:
                raise ValueError(
                    f"shape profile {self.input!r}: need 0 < min <= opt <= max in every "
                    f"dimension, got {self.min} / {self.opt} / {self.max}"
                )
        return self


class OrtOptions(_Frozen):
    """ONNX Runtime backend options (its TensorRT EP partitions like TFLite's delegate)."""

    providers: tuple[OrtProvider, ...] = Field(
        default=("CPUExecutionProvider",),
        min_length=1,
        description="Execution providers in order of preference; CPU is the fallback.",
    )
    graph_optimization_level: OrtOptLevel = Field(
        default="all", description="ORT graph optimisation level of the saved optimised model."
    )
    trt_min_subgraph_size: int = Field(
        default=1, ge=1, description="TensorRT EP: smallest subgraph handed to TensorRT."
    )
    trt_max_partitions: int | None = Field(
        default=None, ge=1, description="TensorRT EP: most partitions handed to TensorRT."
    )


class DelegateConfig(_Frozen):
    """The resolved per-device delegate configuration of one model slot."""

    runtime: Runtime = Field(
        default="auto",
        description="auto = TensorRT where it imports and a CUDA device exists, else ONNX Runtime.",
    )
    precision: Precision = Field(
        default="fp32", description="fp32, fp16, int8 or best (let TensorRT pick per layer)."
    )
    strongly_typed: bool = Field(
        default=False, description="Build a strongly typed network: types come from the ONNX."
    )
    dla_core: int | None = Field(
        default=None, ge=0, description="DLA core to use (Jetson Xavier/Orin); None = the GPU."
    )
    gpu_fallback: bool = Field(
        default=True, description="Run layers the DLA cannot run on the GPU instead of failing."
    )
    fallback: Fallback = Field(
        default="onnxruntime",
        description="When TensorRT cannot build, load or validate a version for reasons of the "
        "model (its parser refuses it, the build child dies, no execution context, outputs "
        "off the reference): onnxruntime = serve it on ONNX Runtime and say why; none = fail "
        "the slot (for models that must run on TensorRT or not at all).",
    )
    build_timeout_s: float | None = Field(
        default=None,
        gt=0,
        le=7 * 24 * 3600,
        description="Longest a TensorRT build of this config may run before it is killed and "
        "the slot falls back (fallback: onnxruntime) or fails (none); unset: the agent's "
        "build_timeout_s setting. A stuck build must not hold a slot for ever.",
    )
    workspace_mib: int | None = Field(
        default=None, gt=0, description="Builder workspace pool limit in MiB; None = default."
    )
    tf32: bool = Field(
        default=False,
        description="Allow TF32 math in FP32 layers (Ampere and later, Orin included): faster, "
        "but FP32 results then differ from ONNX Runtime by ~1e-3; off by default.",
    )
    refittable: bool = Field(
        default=False,
        description="Build with BuilderFlag.REFIT: a new version that changes only the weights "
        "is refitted in place (no second engine in memory); engines may run slightly slower.",
    )
    disabled_tactic_sources: tuple[TacticSource, ...] = Field(
        default=(),
        description="TensorRT tactic sources the builder must not use, e.g. CUBLAS, CUBLAS_LT "
        "and CUDNN on memory-tight Jetsons (those libraries take hundreds of MiB when loaded) "
        "or where they are not installed.",
    )
    builder_optimization_level: int = Field(
        default=3, ge=0, le=5, description="TensorRT builder optimisation level (0-5)."
    )
    shapes: tuple[ShapeProfile, ...] = Field(
        default=(), description="Optimisation profiles for dynamic inputs."
    )
    default_shapes: tuple[str, ...] = Field(
        default=(),
        exclude=True,
        description="Inputs whose profile in shapes is not the config's but the controller's "
        "default, from the shapes the version was pushed with (shared.default_profile); set by "
        "the controller, never by a config layer. Kept in the controller (provenance says it), "
        "never serialised: agents that predate it refuse unknown fields in a desired document.",
    )
    max_aux_streams: int | None = Field(
        default=None, ge=0, description="Auxiliary streams per context; 0 = single stream."
    )
    streams: int = Field(default=1, ge=1, le=16, description="Execution contexts to serve with.")
    timing_cache: bool = Field(
        default=True, description="Reuse a timing cache kept per validity key."
    )
    calibration_cache_sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="Artifact holding the INT8 calibration cache.",
    )
    power_mode: str | None = Field(
        default=None, description="nvpmodel mode name the engine should be tuned and run under."
    )
    apply_power_mode: bool = Field(
        default=False,
        description="Let the agent switch nvpmodel to power_mode (only modes that need no reboot).",
    )
    jetson_clocks: bool | None = Field(
        default=None, description="Lock clocks with jetson_clocks; None = leave as is."
    )
    preference: Preference = Field(
        default="sustained_throughput",
        description="sustained_throughput (video: contexts, batching) or lowest_latency (batch 1).",
    )
    max_batch_size: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="Dynamic batching: rows per batched inference; 1 = off (needs a dynamic "
        "batch dimension). Carried to the agent as the slot's serving settings.",
    )
    max_queue_delay_ms: float = Field(
        default=0, ge=0, le=10_000, description="How long a request may wait to be batched."
    )
    onnxruntime: OrtOptions = Field(default_factory=OrtOptions)

    def profile_note(self) -> str:
        """`` with shape profile x=1x3x224x224`` (``x=1x3x224x224..4x3x224x224`` for a range)
        for a build event: what the engine is built for ('' without profiles)."""

        def text(shape: tuple[int, ...]) -> str:
            return "x".join(map(str, shape))

        named = [
            f"{p.input}={text(p.opt)}" if p.min == p.opt == p.max else
            f"{p.input}={text(p.min)}..{text(p.max)} (opt {text(p.opt)})"
            for p in self.shapes
        ]  # fmt: skip
        if not named:
            return ""
        return f" with shape profile{'s' if len(named) > 1 else ''} {', '.join(named)}"


BUILD_FIELDS = (
    "runtime",
    "precision",
    "strongly_typed",
    "dla_core",
    "gpu_fallback",
    "workspace_mib",
    "builder_optimization_level",
    "shapes",
    "max_aux_streams",
    "calibration_cache_sha256",
    "onnxruntime",
)
"""Fields that change the built engine. The rest (streams, timing cache, power mode, clocks, the
TensorRT fallback, preference, batching) change how an engine is run or tuned, or what a device
does when it cannot build one, not what it is: see shared.engine_keys."""
BUILD_FIELDS_IF_SET = ("tf32", "refittable", "disabled_tactic_sources")
"""Fields that change the built engine, added after engine keys were in the field: they enter the
key only when set away from their default, so every engine built before they existed keeps its
key (and is not rebuilt across the fleet by an upgrade)."""


def is_dynamic(dim: Dim) -> bool:
    """Whether ``dim`` is dynamic: a symbolic name or a negative size."""
    return isinstance(dim, str) or dim < 0


def check_config(
    config: DelegateConfig,
    inputs: Mapping[str, Sequence[Dim]],
    *,
    has_qdq: bool,
    dla_cores: int | None,
    has_samples: bool = False,
    device_class: str = "this device",
    no_default: Mapping[str, str] | None = None,
) -> list[str]:
    """Mistakes in ``config`` for a model with ``inputs`` on a device with ``dla_cores``.

    ``dla_cores`` None means unknown (not checked). ``has_samples``: the version's reference
    holds the operator's sample inputs (``--inputs``, or an uploaded reference), which a device
    calibrates INT8 from when no calibration cache is named; random inputs the controller made
    up do not count (scales fitted to noise, not to the data the model will see).
    ``no_default``: input → why the shape its version was pushed with cannot be its default
    profile (``shared.default_profile``), said with the input's missing profile. Returns one
    sentence per problem, each saying what to change; an empty list means the config is
    buildable as far as can be told.
    """
    problems: list[str] = []
    calibrates = has_samples and not config.strongly_typed  # a typed network takes no scales
    if config.precision == "int8" and not (
        config.calibration_cache_sha256 or has_qdq or calibrates
    ):
        problems.append(
            "precision int8 needs a calibration cache (calibration_cache_sha256), a model "
            "with Q/DQ nodes, or sample inputs to calibrate on the device: push the version "
            "again with --inputs samples.npz (representative inputs; random ones calibrate "
            "poorly)"
        )
    if config.dla_core is not None:
        if dla_cores == 0:
            problems.append(f"dla_core {config.dla_core} requested but {device_class} has no DLA")
        elif dla_cores is not None and config.dla_core >= dla_cores:
            problems.append(
                f"dla_core {config.dla_core} requested but {device_class} has {dla_cores} DLA "
                f"core(s) (0-{dla_cores - 1})"
            )
        if config.precision == "fp32" and not config.strongly_typed:
            problems.append("the DLA runs fp16 or int8 only: set precision fp16 or int8")
    seen: set[str] = set()
    for profile in config.shapes:
        if profile.input in seen:
            problems.append(f"shape profile for {profile.input!r} given twice")
        seen.add(profile.input)
        dims = inputs.get(profile.input)
        if dims is None:
            known = ", ".join(sorted(inputs)) or "none"
            problems.append(
                f"shape profile names {profile.input!r}, not an input (inputs: {known})"
            )
            continue
        if len(profile.min) != len(dims):
            problems.append(
                f"shape profile {profile.input!r} has rank {len(profile.min)}, "
                f"the input has rank {len(dims)}"
            )
            continue
        for axis, dim in enumerate(dims):
            if is_dynamic(dim):
                continue
            if not profile.min[axis] == profile.opt[axis] == profile.max[axis] == dim:
                problems.append(
                    f"shape profile {profile.input!r} axis {axis} is fixed at {dim} in the model "
                    "and must be the same in min/opt/max"
                )
    for name, dims in sorted(inputs.items()):
        if (
            any(is_dynamic(d) for d in dims)
            and name not in seen
            and config.runtime != "onnxruntime"
        ):
            why = (no_default or {}).get(name)
            problems.append(
                f"input {name!r} has dynamic dimensions {list(dims)}: add a shape profile"
                + (f" ({why})" if why else "")
            )
    return problems
