"""Delegate config → TensorRT builder settings, as plain data (pure, tested everywhere).

:func:`build_plan` decides every flag, pool limit, DLA setting and profile the builder will set,
following trtexec (tensorrt-notes.md §2.1, §7.1): precisions add builder flags unless the network
is strongly typed (then types come from the ONNX); ``--useDLACore`` means DLA as the default
device type, the core, FP16 unless INT8, ``PREFER_PRECISION_CONSTRAINTS`` and either
``GPU_FALLBACK`` or ``DIRECT_IO``. :mod:`agent.engines.builder_trt` only translates the names.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.delegate import DelegateConfig, ShapeProfile

MIB = 1024 * 1024


class TrtConfigError(ValueError):
    """The config cannot be built on this device; the message says what to change."""


@dataclass(frozen=True)
class TrtBuildPlan:
    """What to set on ``trt.Builder``/``IBuilderConfig`` (names of the TensorRT enums)."""

    network_flags: tuple[str, ...]
    builder_flags: tuple[str, ...]
    memory_pools: dict[str, int]
    default_device_type: str
    dla_core: int | None
    profiles: tuple[ShapeProfile, ...]
    builder_optimization_level: int
    max_aux_streams: int | None
    use_timing_cache: bool
    use_calibration_cache: bool
    notes: tuple[str, ...] = ()


def _precision_flags(config: DelegateConfig, fast_fp16: bool, notes: list[str]) -> list[str]:
    if config.strongly_typed:
        if config.precision != "fp32":
            notes.append(
                f"precision {config.precision} ignored: a strongly typed network takes its "
                "types from the ONNX"
            )
        return []
    flags: list[str] = []
    if config.precision in ("fp16", "best"):
        if fast_fp16:
            flags.append("FP16")
        else:
            notes.append("this GPU has no fast FP16: building without the FP16 flag")
    if config.precision in ("int8", "best"):
        flags.append("INT8")
    return flags


def build_plan(
    config: DelegateConfig, platform_has_fast_fp16: bool, dla_cores: int | None
) -> TrtBuildPlan:
    """The builder settings for ``config`` on a device with ``dla_cores`` (None = unknown)."""
    notes: list[str] = []
    network_flags = ("STRONGLY_TYPED",) if config.strongly_typed else ()
    flags = _precision_flags(config, platform_has_fast_fp16, notes)
    device_type = "GPU"
    if config.dla_core is not None:
        if dla_cores is not None and config.dla_core >= dla_cores:
            have = "no DLA" if dla_cores == 0 else f"{dla_cores} DLA core(s)"
            raise TrtConfigError(
                f"dla_core {config.dla_core} requested but this device has {have}: "
                "unset dla_core or pick an existing core"
            )
        device_type = "DLA"
        if not config.strongly_typed and "INT8" not in flags and "FP16" not in flags:
            flags.append("FP16")
        flags.append("PREFER_PRECISION_CONSTRAINTS")
        flags.append("GPU_FALLBACK" if config.gpu_fallback else "DIRECT_IO")
    pools = {"WORKSPACE": config.workspace_mib * MIB} if config.workspace_mib else {}
    use_calibration = config.precision in ("int8", "best") and bool(config.calibration_cache_sha256)
    return TrtBuildPlan(
        network_flags=network_flags,
        builder_flags=tuple(flags),
        memory_pools=pools,
        default_device_type=device_type,
        dla_core=config.dla_core,
        profiles=config.shapes,
        builder_optimization_level=config.builder_optimization_level,
        max_aux_streams=config.max_aux_streams,
        use_timing_cache=config.timing_cache and config.builder_optimization_level > 0,
        use_calibration_cache=use_calibration and not config.strongly_typed,
        notes=tuple(notes),
    )
