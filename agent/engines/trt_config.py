"""Delegate config → the TensorRT host's build request as plain JSON data (pure, tested anywhere).

:func:`host_build_request` turns a :class:`~agent.engines.build_protocol.BuildRequest` into what
``<tensorrt python> -m agent.trt_host.build_child`` reads (:func:`agent.trt_host.backend_trt.
build_options` names every key): the host decides the flags per TensorRT release (FP16 only where
the GPU has fast FP16, DLA as trtexec's ``--useDLACore``, the explicit-batch flag on 8.x).
Decided here, where the device's facts are known: a DLA core this device does not have is a
:class:`TrtConfigError` before any child starts; the config's shape profiles are ONE optimization
profile (every profile must set every dynamic input; one profile per input cannot build); the
timing cache is used at optimization levels above 0 only; the calibration cache only for INT8
precisions of weakly typed networks, and without one the version's sample inputs (the host then
calibrates on the device; it skips them for a model with Q/DQ). TF32, REFIT and the disabled
tactic sources are the config's own (TF32 off by default, so FP32 engines match ONNX Runtime).
"""

from __future__ import annotations

from typing import Any

from agent.engines.build_protocol import BuildRequest
from shared.delegate import DelegateConfig

MIB = 1024 * 1024


class TrtConfigError(ValueError):
    """The config cannot be built on this device; the message says what to change."""


def host_build_options(
    config: DelegateConfig,
    dla_cores: int | None,
    timing_cache_path: str | None = None,
    calibration_cache_path: str | None = None,
    calibration_inputs_path: str | None = None,
) -> dict[str, Any]:
    """The plain build options of ``config`` on a device with ``dla_cores`` (None = unknown)."""
    if config.dla_core is not None and dla_cores is not None and config.dla_core >= dla_cores:
        have = "no DLA" if dla_cores == 0 else f"{dla_cores} DLA core(s)"
        raise TrtConfigError(
            f"dla_core {config.dla_core} requested but this device has {have}: "
            "unset dla_core or pick an existing core"
        )
    options: dict[str, Any] = {
        "precision": "fp32" if config.strongly_typed else config.precision,
        "strongly_typed": config.strongly_typed,
        "dla_core": config.dla_core,
        "gpu_fallback": config.gpu_fallback,
        "tf32": config.tf32,
        "refittable": config.refittable,
        "disabled_tactic_sources": list(config.disabled_tactic_sources),
        "optimization_level": config.builder_optimization_level,
        "max_aux_streams": config.max_aux_streams,
        "profiles": [
            [
                {"input": s.input, "min": list(s.min), "opt": list(s.opt), "max": list(s.max)}
                for s in config.shapes
            ]
        ]
        if config.shapes
        else [],
    }
    if config.workspace_mib:
        options["workspace_bytes"] = config.workspace_mib * MIB
    use_timing = config.timing_cache and config.builder_optimization_level > 0
    options["use_timing_cache"] = use_timing and timing_cache_path is not None
    if options["use_timing_cache"]:
        options["timing_cache_path"] = timing_cache_path
    int8 = config.precision in ("int8", "best") and not config.strongly_typed
    if int8 and config.calibration_cache_sha256 and calibration_cache_path is not None:
        options["calibration_cache_path"] = calibration_cache_path
    elif int8 and not config.calibration_cache_sha256 and calibration_inputs_path is not None:
        options["calibration_inputs_path"] = calibration_inputs_path
    return options


def host_build_request(request: BuildRequest) -> dict[str, Any]:
    """The JSON ``agent.trt_host.build_child`` reads for ``request`` (TrtConfigError)."""

    def text(path: Any) -> str | None:
        return str(path) if path is not None else None

    return {
        "source": str(request.onnx_path),
        "target": str(request.output_path),
        "options": host_build_options(
            request.config,
            request.dla_cores,
            text(request.timing_cache_path),
            text(request.calibration_cache_path),
            text(request.calibration_inputs_path),
        ),
    }
