"""ONNX bytes → serialized TensorRT plan, on every supported release.

The build steps and trtexec flags mirrored here: docs/tensorrt.md#building-a-plan.

:func:`build` takes ``trt`` (the module) and its :class:`~.versions.Capabilities`, so the path is
chosen from the detected release and checkable against a stand-in of any release:

- network: ``EXPLICIT_BATCH`` on 8.x (``create_network(0)`` is implicit batch there and the ONNX
  parser rejects it); ``STRONGLY_TYPED`` when asked and offered; parser errors collected;
- profiles: each :class:`BuildOptions` profile sets EVERY dynamic input (a missing one is a
  :class:`BuildError` naming it), and ``add_optimization_profile``'s answer is checked;
- precision flags (where weak typing exists), TF32 set or cleared explicitly, DLA core with GPU
  fallback, workspace through ``set_memory_pool_limit``, tactic sources switched off by name,
  ``BuilderFlag.REFIT`` when asked, INT8 from a calibration cache of this release (another
  release's is refused before building) or calibrated here from sample inputs (:mod:`.calibration`),
  timing cache in and out, optimization level and aux streams only where they exist;
- progress: ``IProgressMonitor`` where it exists, else a heartbeat fed by the logger's messages
  (at most one per ``heartbeat_s``).

Not thread-safe per call (TensorRT builds are not); one build at a time per process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import calibration
from .trt_logger import make_logger
from .versions import Capabilities

Progress = Callable[[float, str], None]
PRECISIONS = ("fp32", "fp16", "int8", "best")


class BuildError(RuntimeError):
    """The build failed or cannot be done on this release; ``lines`` are the reasons."""

    def __init__(self, lines: List[str]) -> None:
        super().__init__("; ".join(lines) or "TensorRT build failed")
        self.lines = list(lines)


@dataclass(frozen=True)
class ShapeRange:
    """min/opt/max shape of one input in one optimization profile."""

    input: str
    min: Tuple[int, ...]
    opt: Tuple[int, ...]
    max: Tuple[int, ...]


@dataclass(frozen=True)
class BuildOptions:
    """Everything a build may set. ``profiles``: each entry is one optimization profile and must
    cover every dynamic input. ``tf32`` is explicit (TensorRT's own default is on, which moves
    FP32 results by ~1e-3 on Ampere and later, Orin included)."""

    precision: str = "fp32"
    tf32: bool = False
    profiles: Tuple[Tuple[ShapeRange, ...], ...] = ()
    workspace_bytes: Optional[int] = None
    dla_core: Optional[int] = None
    gpu_fallback: bool = True
    disabled_tactic_sources: Tuple[str, ...] = ()
    refittable: bool = False
    calibration_cache: Optional[bytes] = None
    calibration_inputs: Optional[str] = None  # NPZ path: input:<tensor> arrays, case axis first
    timing_cache: Optional[bytes] = None
    use_timing_cache: bool = True
    strongly_typed: bool = False
    optimization_level: Optional[int] = None
    max_aux_streams: Optional[int] = None
    profiling_verbosity: str = "DETAILED"


@dataclass(frozen=True)
class BuildResult:
    plan: bytes
    timing_cache: Optional[bytes]
    notes: Tuple[str, ...]
    calibration_cache: Optional[bytes] = None  # written by a calibration from sample inputs


def _heartbeat(progress: Progress, every_s: float) -> Callable[[str], None]:
    last = [float("-inf")]

    def beat(message: str) -> None:
        now = time.monotonic()
        if now - last[0] >= every_s:
            last[0] = now
            progress(2.0, "building: " + message[:200])

    return beat


def _monitor(trt: Any, progress: Progress) -> Any:
    class Monitor(trt.IProgressMonitor):  # type: ignore[misc]
        """Maps TensorRT's nested phases to one percentage (the outermost phase's steps)."""

        def __init__(self) -> None:
            trt.IProgressMonitor.__init__(self)
            self._phases: Dict[str, Tuple[Optional[str], int]] = {}

        def phase_start(self, phase_name: str, parent_phase: Optional[str], num_steps: int) -> None:
            self._phases[phase_name] = (parent_phase, max(int(num_steps), 1))

        def step_complete(self, phase_name: str, step: int) -> bool:
            parent, steps = self._phases.get(phase_name, (None, 1))
            if parent is None:
                progress(min(99.0, 2.0 + 97.0 * (step + 1) / steps), phase_name)
            return True

        def phase_finish(self, phase_name: str) -> None:
            self._phases.pop(phase_name, None)

    return Monitor()


def _calibrator(
    trt: Any,
    builder: Any,
    config: Any,
    network: Any,
    profiles: List[Any],
    options: BuildOptions,
    cuda: Any,
) -> Any:
    """The INT8 calibrator: the stored cache (its release checked in :func:`_check_options`), or
    the sample inputs, one case per batch, on a calibration profile of their shapes."""
    profile, batches = (profiles[0] if profiles else None), None
    if options.calibration_inputs is not None:
        try:
            batches, profile = calibration.from_samples(
                builder, network, options.calibration_inputs, cuda
            )
        except calibration.CalibrationError as exc:
            raise BuildError([str(exc)]) from exc
    calibrator = calibration.make_calibrator(trt, options.calibration_cache, batches)
    config.int8_calibrator = calibrator
    if profile is not None and not config.set_calibration_profile(profile):
        raise BuildError(["TensorRT refused the calibration profile"])
    return calibrator


def _check_options(caps: Capabilities, options: BuildOptions, dla_cores: int) -> None:
    if options.precision not in PRECISIONS:
        raise BuildError(["precision %r: use one of %s" % (options.precision, PRECISIONS)])
    if options.precision != "fp32" and not caps.weak_typing_flags:
        raise BuildError(
            [
                "precision %s: TensorRT %s builds strongly typed networks only, types come "
                "from the ONNX (export it in FP16, or with Q/DQ for INT8)"
                % (options.precision, caps.label)
            ]
        )
    if options.calibration_cache is not None and not caps.int8_calibrator:
        raise BuildError(["INT8 calibration caches are gone in TensorRT %s: use Q/DQ" % caps.label])
    if options.calibration_inputs is not None:
        if not caps.int8_calibrator or options.precision not in ("int8", "best"):
            raise BuildError(["calibration_inputs need precision int8 or best, TensorRT < 11"])
        if options.calibration_cache is not None:
            raise BuildError(["give calibration_cache or calibration_inputs, not both"])
    if options.calibration_cache is not None:
        problem = calibration.cache_problem(caps.version, options.calibration_cache)
        if problem:
            raise BuildError([problem])
    if options.strongly_typed and not (caps.strongly_typed_flag or caps.always_strongly_typed):
        raise BuildError(["strongly typed networks need TensorRT >= 9.1 (this is %s)" % caps.label])
    if options.strongly_typed and options.precision != "fp32":
        # TensorRT 10 refuses BuilderFlag.FP16/INT8 on a strongly typed network.
        raise BuildError(
            [
                "precision %s with strongly_typed: a strongly typed network takes its types "
                "from the ONNX; set precision fp32, or turn strongly_typed off" % options.precision
            ]
        )
    if options.dla_core is not None:
        if not caps.dla:
            raise BuildError(["TensorRT %s has no DLA support: unset dla_core" % caps.label])
        if options.dla_core >= dla_cores:
            have = "no DLA" if dla_cores == 0 else "%d DLA core(s)" % dla_cores
            raise BuildError(
                ["dla_core %d requested but this device has %s" % (options.dla_core, have)]
            )
    unknown = [
        n
        for n in options.disabled_tactic_sources
        if n not in caps.tactic_sources and n not in ("CUBLAS", "CUBLAS_LT", "CUDNN")
    ]
    if unknown:
        raise BuildError(["unknown tactic sources %s (known: %s)" % (unknown, caps.tactic_sources)])


def _network(trt: Any, caps: Capabilities, builder: Any, options: BuildOptions) -> Any:
    flag_enum = trt.NetworkDefinitionCreationFlag
    flags = 0
    if caps.explicit_batch_flag:
        flags |= 1 << int(flag_enum.EXPLICIT_BATCH)
    if options.strongly_typed and caps.strongly_typed_flag:
        flags |= 1 << int(flag_enum.STRONGLY_TYPED)
    return builder.create_network(flags)


def _dynamic_inputs(network: Any) -> Dict[str, Tuple[int, ...]]:
    found: Dict[str, Tuple[int, ...]] = {}
    for i in range(int(network.num_inputs)):
        tensor = network.get_input(i)
        shape = tuple(int(d) for d in tensor.shape)
        if any(d < 0 for d in shape):
            found[str(tensor.name)] = shape
    return found


def _fixed_profiles(network: Any) -> Tuple[Tuple[ShapeRange, ...], ...]:
    """One profile of the inputs' own shapes for a network whose inputs are all static but
    whose outputs are data-dependent (NonZero, NonMaxSuppression): real TensorRT 8.5.2 refuses
    to build such a network without any profile ("Profile kOPT values are not self-consistent
    ... need profile") and builds it with this one. Nothing for other networks, nor where an
    input is a shape tensor (its profile needs values, not shapes)."""
    outputs = [network.get_output(i) for i in range(int(network.num_outputs))]
    if not any(any(int(d) < 0 for d in tensor.shape) for tensor in outputs):
        return ()
    inputs = [network.get_input(i) for i in range(int(network.num_inputs))]
    if not inputs or any(bool(tensor.is_shape_tensor) for tensor in inputs):
        return ()
    ranges = []
    for tensor in inputs:
        shape = tuple(int(d) for d in tensor.shape)
        ranges.append(ShapeRange(str(tensor.name), shape, shape, shape))
    return (tuple(ranges),)


def _add_profiles(builder: Any, config: Any, network: Any, options: BuildOptions) -> List[Any]:
    dynamic = _dynamic_inputs(network)
    if dynamic and not options.profiles:
        raise BuildError(
            ["dynamic inputs %s need a shape profile (min/opt/max)" % ", ".join(sorted(dynamic))]
        )
    made: List[Any] = []
    profiles = options.profiles or _fixed_profiles(network)
    for number, ranges in enumerate(profiles):
        named = {r.input: r for r in ranges}
        missing = sorted(set(dynamic) - set(named))
        if missing:
            raise BuildError(
                [
                    "profile %d does not set dynamic input(s) %s: every profile must set every "
                    "dynamic input" % (number, ", ".join(missing))
                ]
            )
        profile = builder.create_optimization_profile()
        for r in ranges:
            profile.set_shape(r.input, min=r.min, opt=r.opt, max=r.max)
        index = config.add_optimization_profile(profile)
        if int(index) < 0:
            raise BuildError(["TensorRT rejected optimization profile %d (%s)" % (number, ranges)])
        made.append(profile)
    return made


def _has_qdq(trt: Any, network: Any) -> bool:
    """Whether the parsed network holds Q/DQ layers (an explicitly quantized model)."""
    kinds = (trt.LayerType.QUANTIZE, trt.LayerType.DEQUANTIZE)
    return any(network.get_layer(i).type in kinds for i in range(int(network.num_layers)))


def _configure(
    trt: Any,
    caps: Capabilities,
    builder: Any,
    config: Any,
    options: BuildOptions,
    qdq: bool = False,
) -> List[str]:
    flag = trt.BuilderFlag
    notes: List[str] = []
    weak: List[str] = []  # the weak-typing flags set (deprecated from 10.12)
    if options.workspace_bytes:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(options.workspace_bytes))
    if options.tf32:
        config.set_flag(flag.TF32)
    else:
        config.clear_flag(flag.TF32)
    wants_fp16 = options.precision in ("fp16", "best")
    wants_int8 = options.precision in ("int8", "best")
    if wants_fp16:
        if caps.platform_speed_queries and not builder.platform_has_fast_fp16:
            notes.append("this GPU has no fast FP16: building without the FP16 flag")
        else:
            config.set_flag(flag.FP16)
            weak.append("FP16")
    typed = options.strongly_typed or caps.always_strongly_typed
    if wants_int8:
        config.set_flag(flag.INT8)
        weak.append("INT8")
    elif qdq and not typed:
        # Q/DQ layers are INT8 whatever the config asks: a weakly typed 8.x network refuses
        # to build without the flag ("Int8 precision has been set for a layer or layer output,
        # but int8 is not configured in the builder", real 8.5.2 and 8.6.0)
        config.set_flag(flag.INT8)
        weak.append("INT8")
        notes.append("the model is quantized (Q/DQ layers): INT8 enabled where it says so")
    if options.dla_core is not None:
        config.default_device_type = trt.DeviceType.DLA
        config.DLA_core = int(options.dla_core)
        if caps.weak_typing_flags and not typed and not (wants_fp16 or wants_int8):
            config.set_flag(flag.FP16)  # a strongly typed network's DLA layers are typed by it
            weak.append("FP16")
        config.set_flag(flag.GPU_FALLBACK if options.gpu_fallback else flag.DIRECT_IO)
    if options.refittable:
        config.set_flag(flag.REFIT)
    if options.disabled_tactic_sources:
        mask = int(config.get_tactic_sources())
        for name in options.disabled_tactic_sources:
            if name in caps.tactic_sources:
                mask &= ~(1 << int(getattr(trt.TacticSource, name)))
        if not config.set_tactic_sources(mask):  # False: every source stays on
            raise BuildError(
                [
                    "TensorRT refused to switch off tactic sources %s (mask %#x)"
                    % (list(options.disabled_tactic_sources), mask)
                ]
            )
    if options.optimization_level is not None:
        if caps.optimization_level:
            config.builder_optimization_level = int(options.optimization_level)
        else:
            notes.append("builder optimization level needs TensorRT >= 8.6: ignored")
    if options.max_aux_streams is not None:
        if caps.aux_streams:
            config.max_aux_streams = int(options.max_aux_streams)
        else:
            notes.append("max_aux_streams needs TensorRT >= 8.6: ignored")
    config.profiling_verbosity = getattr(trt.ProfilingVerbosity, options.profiling_verbosity)
    return notes + caps.build_deprecations(weak, calibrates=wants_int8 and not qdq)


def build(
    trt: Any,
    caps: Capabilities,
    onnx: bytes,
    options: BuildOptions,
    progress: Optional[Progress] = None,
    heartbeat_s: float = 1.0,
    cuda: Any = None,
) -> BuildResult:
    """Build ``onnx`` into a plan; BuildError with the parser's or TensorRT's own words.
    ``cuda``: the :class:`~.cudart.CudaRuntime` for calibration batches (opened when needed)."""
    report: Progress = progress if progress is not None else (lambda pct, msg: None)
    use_heartbeat = progress is not None and not caps.progress_monitor
    logger = make_logger(trt, _heartbeat(report, heartbeat_s) if use_heartbeat else None)
    builder = trt.Builder(logger)
    _check_options(caps, options, int(builder.num_DLA_cores) if options.dla_core is not None else 0)
    network = _network(trt, caps, builder, options)
    parser = trt.OnnxParser(network, logger)  # owns the weights on 8.x: alive until built
    report(1.0, "parsing ONNX")
    if not parser.parse(onnx):
        errors = [str(parser.get_error(i)) for i in range(int(parser.num_errors))]
        raise BuildError(errors + logger.take_errors() or ["the ONNX parser refused the model"])
    config = builder.create_builder_config()
    profiles = _add_profiles(builder, config, network, options)
    notes = _configure(trt, caps, builder, config, options, _has_qdq(trt, network))
    calibrator = None
    if options.calibration_inputs is not None and _has_qdq(trt, network):
        notes.append("the model is quantized (Q/DQ layers): its sample inputs are not calibrated")
    elif options.calibration_cache is not None or options.calibration_inputs is not None:
        calibrator = _calibrator(trt, builder, config, network, profiles, options, cuda)
    if options.use_timing_cache:
        cache = config.create_timing_cache(options.timing_cache or b"")
        if not config.set_timing_cache(cache, ignore_mismatch=False) and options.timing_cache:
            # another release or device wrote it (it used to be dropped without a word)
            notes.append("TensorRT refused the timing cache (written elsewhere): built without it")
            config.set_timing_cache(config.create_timing_cache(b""), ignore_mismatch=False)
    if progress is not None and caps.progress_monitor:
        config.progress_monitor = _monitor(trt, report)
    report(2.0, "building (TensorRT times tactics on this device)")
    try:
        serialized = builder.build_serialized_network(network, config)
    finally:
        if calibrator is not None:
            calibrator.close()  # the calibration's device buffers
    if calibrator is not None and calibrator.errors:
        raise BuildError(calibrator.errors + logger.take_errors())
    if serialized is None:
        raise BuildError(logger.take_errors() or ["build_serialized_network returned None"])
    plan = bytes(memoryview(serialized))
    timing: Optional[bytes] = None
    if options.use_timing_cache:
        timing = bytes(memoryview(config.get_timing_cache().serialize()))
    written = calibrator.written if calibrator is not None else None
    del calibrator, parser
    report(100.0, "plan serialized")
    return BuildResult(
        plan=plan, timing_cache=timing, notes=tuple(notes), calibration_cache=written
    )
