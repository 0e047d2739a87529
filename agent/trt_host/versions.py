"""The TensorRT release → what its Python API offers, one named capability per difference.

Pure. :func:`parse_version` reads ``trt.__version__``; :meth:`Capabilities.for_version` decides
every capability from that version alone (never by probing with try/except AttributeError), so the
same code path can be checked per release against NVIDIA's binding sources
(``tests/fixtures/tensorrt_python_api.tsv``, differences listed in
docs/tensorrt.md#python-api-differences-per-release; the numbers in brackets below are that list's
items). Supported: 8.5 (JetPack 5.1) up to the newest release the table records (11.1); anything
else is a :class:`UnsupportedTensorRT` error that says what to install.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import FrozenSet, List, Sequence, Tuple, Union

OLDEST = (8, 5)
NEWEST = (11, 1)

# Memory modes for user-managed activation memory [13-16]:
MEMORY_V1_PROPERTY = "v1_property"  # 8.x/9.x: create_execution_context_without_device_memory()
#                                     + context.device_memory = ptr, size device_memory_size
MEMORY_STRATEGY_PROPERTY = "strategy_property"  # 10.0: strategy=USER_MANAGED + property
#   (no JetPack ships 10.0 and the API table has no 10.0 column, so no stand-in checks this
#   branch; its names are present at NVIDIA's tag v10.0.1, python/src/infer/pyCore.cpp)
MEMORY_V2 = "v2"  # >= 10.1: strategy=USER_MANAGED + set_device_memory(ptr, size), size _v2

# Refit routes [22, 24]:
REFIT_NAMED_WEIGHTS = "named_weights"  # Refitter.set_named_weights from the ONNX initializers
REFIT_ONNX_REFITTER = "onnx_refitter"  # OnnxParserRefitter.refit_from_bytes (>= 10.0)

_BASE_DTYPES = ("FLOAT", "HALF", "INT8", "INT32", "BOOL", "UINT8")


class UnsupportedTensorRT(RuntimeError):
    """The installed TensorRT is outside the releases this host supports."""


def parse_version(text: str) -> Tuple[int, int, int]:
    """``"8.5.2.2"`` → (8, 5, 2); UnsupportedTensorRT when it is not a version at all."""
    match = re.match(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    if match is None:
        raise UnsupportedTensorRT(f"cannot read a TensorRT version from {text!r}")
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


@dataclass(frozen=True)
class Capabilities:
    """What the TensorRT Python API of one release offers (see the module docstring)."""

    version: Tuple[int, int, int]
    # network creation [4, 5]
    explicit_batch_flag: bool  # 8.x: EXPLICIT_BATCH must be set (create_network(0) = implicit)
    strongly_typed_flag: bool  # NetworkDefinitionCreationFlag.STRONGLY_TYPED can be set (>= 9.1)
    always_strongly_typed: bool  # 11.x: every network is strongly typed, the flag is deprecated
    # builder [6-10, 26-30]
    weak_typing_flags: bool  # BuilderFlag.FP16/INT8 and precision constraints (< 11)
    precision_flags_deprecated: bool  # BuilderFlag.FP16/INT8 deprecated (10.12 to 10.x, docs only)
    platform_speed_queries: bool  # Builder.platform_has_fast_fp16/_int8 (< 11)
    progress_monitor: bool  # IProgressMonitor + config.progress_monitor (>= 9.1)
    optimization_level: bool  # config.builder_optimization_level (>= 8.6)
    aux_streams: bool  # config.max_aux_streams (>= 8.6)
    int8_calibrator: bool  # IInt8EntropyCalibrator2 + config.int8_calibrator (< 11)
    calibration_deprecated: bool  # int8_calibrator, set_calibration_profile (10.1 to 10.x; warn)
    timing_cache: bool  # create_timing_cache / set_timing_cache / serialize (all releases)
    tactic_sources: Tuple[str, ...]  # TacticSource names that exist
    tf32_flag: bool  # BuilderFlag.TF32 (all releases)
    dla: bool  # DLA builds (<= 10.7 and >= 11.4; docs/tensorrt.md#dla)
    refit_identical_flag: bool  # BuilderFlag.REFIT_IDENTICAL (>= 10.0)
    # runtime [11-19]
    memory_mode: str  # MEMORY_V1_PROPERTY | MEMORY_STRATEGY_PROPERTY | MEMORY_V2
    refit_route: str  # REFIT_NAMED_WEIGHTS | REFIT_ONNX_REFITTER
    dtypes: FrozenSet[str]  # DataType names of this release

    @property
    def label(self) -> str:
        return ".".join(str(part) for part in self.version)

    def build_deprecations(self, flags: Sequence[str], calibrates: bool) -> List[str]:
        """Notes on what a build that sets ``BuilderFlag`` ``flags`` (and, ``calibrates``, takes
        INT8 scales from a calibrator) uses that this release deprecates. The flags
        are deprecated by documentation only; the calibrator's setters warn through
        PyErr_WarnEx, which Python's default filters drop (the caller is not ``__main__``)."""
        notes = []
        if flags and self.precision_flags_deprecated:
            notes.append(
                "BuilderFlag.%s %s deprecated in TensorRT %s (superseded by strong typing): this "
                "weakly typed build still works; strongly typed networks are the way "
                "(strongly_typed, with the ONNX in FP16, or with Q/DQ layers for INT8)"
                % ("/".join(flags), "is" if len(flags) == 1 else "are", self.label)
            )
        if calibrates and self.calibration_deprecated:
            notes.append(
                "INT8 calibration (int8_calibrator, set_calibration_profile) is deprecated in "
                "TensorRT %s (superseded by explicit quantization): this build still calibrates; "
                "an ONNX with Q/DQ layers is the way" % self.label
            )
        return notes

    @classmethod
    def for_version(cls, version: Union[str, Sequence[int]]) -> Capabilities:
        """The capabilities of ``version`` (a string such as trt.__version__, or a tuple)."""
        parts = parse_version(version) if isinstance(version, str) else tuple(version)
        padded = (*(int(p) for p in parts), 0, 0, 0)
        v = (padded[0], padded[1], padded[2])
        if v[:2] < OLDEST or v[:2] > NEWEST:
            raise UnsupportedTensorRT(
                "TensorRT %s is not supported: the TensorRT host runs 8.5 (JetPack 5.1) to "
                "%d.%d; install JetPack's python3-libnvinfer of a supported release"
                % (".".join(map(str, v)), NEWEST[0], NEWEST[1])
            )
        major = v[0]
        at_least = v.__ge__
        dtypes = set(_BASE_DTYPES)
        if at_least((8, 6, 0)):
            dtypes.add("FP8")
        if at_least((10, 0, 0)):
            dtypes.update(("BF16", "INT64", "INT4"))
        if at_least((10, 8, 0)):
            dtypes.update(("FP4", "E8M0"))
        if at_least((10, 1, 0)):
            memory_mode = MEMORY_V2
        elif major == 10:
            memory_mode = MEMORY_STRATEGY_PROPERTY
        else:
            memory_mode = MEMORY_V1_PROPERTY
        sources: Tuple[str, ...] = ("EDGE_MASK_CONVOLUTIONS", "JIT_CONVOLUTIONS")
        if major < 11:
            sources = ("CUBLAS", "CUBLAS_LT", "CUDNN", *sources)
        return cls(
            version=v,
            explicit_batch_flag=major < 10,
            strongly_typed_flag=at_least((9, 1, 0)) and major < 11,
            always_strongly_typed=major >= 11,
            weak_typing_flags=major < 11,
            precision_flags_deprecated=at_least((10, 12, 0)) and major < 11,
            platform_speed_queries=major < 11,
            progress_monitor=at_least((9, 1, 0)),
            optimization_level=at_least((8, 6, 0)),
            aux_streams=at_least((8, 6, 0)),
            int8_calibrator=major < 11,
            calibration_deprecated=at_least((10, 1, 0)) and major < 11,
            timing_cache=True,
            tactic_sources=sources,
            tf32_flag=True,
            dla=not at_least((10, 8, 0)) or at_least((11, 4, 0)),
            refit_identical_flag=major >= 10,
            memory_mode=memory_mode,
            refit_route=REFIT_ONNX_REFITTER if major >= 10 else REFIT_NAMED_WEIGHTS,
            dtypes=frozenset(dtypes),
        )
