"""The TensorRT build, in a child process: ONNX parser → builder config → serialized plan.

Runs as ``python -m agent.engines.builder_trt REQUEST.json`` (see build_runner). Follows the
documented TensorRT 10 Python API exactly (tensorrt-notes.md §2.1): ``OnnxParser`` errors are
captured, the builder config comes from the pure :func:`agent.engines.trt_config.build_plan`,
an ``IProgressMonitor`` subclass reports progress, the timing cache is loaded from and saved to
the request's path (one per validity key), an INT8 calibration cache is read through a
cache-only ``IInt8EntropyCalibrator2``, and ``build_serialized_network`` returning None turns the
capturing logger's errors into the failure. ``tensorrt`` is imported only inside :func:`build`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agent.engines.build_protocol import BuilderError, BuildRequest, Progress, child_main
from agent.engines.trt_config import TrtConfigError, build_plan


def _classes(trt: Any, progress: Progress) -> tuple[type, type, type]:
    class CapturingLogger(trt.ILogger):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.errors: list[str] = []

        def log(self, severity: Any, msg: str) -> None:
            if severity <= trt.ILogger.Severity.ERROR:
                self.errors.append(msg)

    class Monitor(trt.IProgressMonitor):  # type: ignore[misc]
        """Maps TensorRT's nested build phases to one percentage (the outermost phase)."""

        def __init__(self) -> None:
            trt.IProgressMonitor.__init__(self)
            self._phases: dict[str, tuple[str | None, int]] = {}

        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            self._phases[phase_name] = (parent_phase, max(num_steps, 1))

        def step_complete(self, phase_name: str, step: int) -> bool:
            parent, steps = self._phases.get(phase_name, (None, 1))
            if parent is None:
                progress(min(99.0, 100.0 * (step + 1) / steps), phase_name)
            return True

        def phase_finish(self, phase_name: str) -> None:
            self._phases.pop(phase_name, None)

    class CacheCalibrator(trt.IInt8EntropyCalibrator2):  # type: ignore[misc]
        """Serves a stored calibration cache; it has no data to calibrate with."""

        def __init__(self, cache: bytes) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)
            self._cache = cache

        def get_batch_size(self) -> int:
            return 1

        def get_batch(self, names: list[str]) -> None:
            return None

        def read_calibration_cache(self) -> bytes:
            return self._cache

        def write_calibration_cache(self, cache: bytes) -> None:
            return None

    return CapturingLogger, Monitor, CacheCalibrator


def build(request: BuildRequest, progress: Progress) -> None:
    """Build the plan of ``request`` and write it to ``request.output_path``."""
    try:
        import tensorrt as trt
    except ImportError as exc:
        raise BuilderError(
            [f"TensorRT not importable ({exc}): install JetPack's python3-libnvinfer"]
        ) from exc
    logger_cls, monitor_cls, calibrator_cls = _classes(trt, progress)
    logger = logger_cls()
    builder = trt.Builder(logger)
    try:
        plan = build_plan(request.config, bool(builder.platform_has_fast_fp16), request.dla_cores)
    except TrtConfigError as exc:
        raise BuilderError([str(exc)]) from exc
    flags = 0
    for name in plan.network_flags:
        flags |= 1 << int(getattr(trt.NetworkDefinitionCreationFlag, name))
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    progress(1, "parsing ONNX")
    if not parser.parse(request.onnx_path.read_bytes(), str(request.onnx_path)):
        raise BuilderError(
            [str(parser.get_error(i)) for i in range(parser.num_errors)] + logger.errors
        )
    config = builder.create_builder_config()
    for name, limit in plan.memory_pools.items():
        config.set_memory_pool_limit(getattr(trt.MemoryPoolType, name), limit)
    for name in plan.builder_flags:
        config.set_flag(getattr(trt.BuilderFlag, name))
    config.builder_optimization_level = plan.builder_optimization_level
    if plan.max_aux_streams is not None:
        config.max_aux_streams = plan.max_aux_streams
    if plan.default_device_type == "DLA":
        config.default_device_type = trt.DeviceType.DLA
        config.DLA_core = plan.dla_core
    for shape in plan.profiles:
        profile = builder.create_optimization_profile()
        profile.set_shape(shape.input, min=shape.min, opt=shape.opt, max=shape.max)
        config.add_optimization_profile(profile)
    if plan.use_calibration_cache and request.calibration_cache_path is not None:
        config.int8_calibrator = calibrator_cls(request.calibration_cache_path.read_bytes())
    timing_path = request.timing_cache_path if plan.use_timing_cache else None
    if timing_path is not None:
        known = timing_path.read_bytes() if timing_path.is_file() else b""
        config.set_timing_cache(config.create_timing_cache(known), ignore_mismatch=False)
    config.progress_monitor = monitor_cls()
    progress(2, "building (TensorRT times tactics on this device)")
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BuilderError(logger.errors or ["build_serialized_network returned None"])
    request.output_path.write_bytes(memoryview(serialized))
    if timing_path is not None:
        _save(timing_path, bytes(memoryview(config.get_timing_cache().serialize())))
    progress(100, "plan serialized")


def _save(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(child_main(build, sys.argv))
