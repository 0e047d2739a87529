"""Rewrite an ONNX model so that TensorRT 8.x can parse public models it otherwise refuses.

Two classes of models fail in TensorRT's ONNX parser although the fix is mechanical:

- QDQ INT8 models from ONNX Runtime's quantizer: "DequantizeLinear: only activation types
  allowed as input to this layer" for the int32 biases (:mod:`.onnx_qdq_fold` folds the
  ``DequantizeLinear`` of constant int32, and on request int8, initializers into float32 ones);
- models whose exporter named every unknown dimension ``"?"``: "Input dimensions with this name
  are inconsistent" (:mod:`.onnx_dim_names` gives those dimensions names of their own; renaming
  only removes equality hints, it never changes what the model computes).

:func:`prepare_for_tensorrt` does both on serialized bytes (pure); :func:`prepared_onnx` applies
it to a build request's ONNX file before a TensorRT build (``build_runner.run_build``), writes the
rewritten model beside the build output and says what it changed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from agent.engines.build_protocol import BuildRequest
from agent.engines.onnx_dim_names import rename_dim_params
from agent.engines.onnx_qdq_fold import FOLD_INT32, fold_constant_dequantize
from agent.trt_host.protobuf_wire import WireError

__all__ = [
    "FOLD_INT32",
    "WireError",
    "fold_constant_dequantize",
    "prepare_for_tensorrt",
    "prepared_onnx",
    "rename_dim_params",
]

log = logging.getLogger(__name__)

PREPARED_SUFFIX = ".prepared.onnx"
_SHOWN = 3  # changes named in the progress message; the log has them all


def prepare_for_tensorrt(
    model: bytes,
    profile: Mapping[str, Sequence[int]],
    *more_profiles: Mapping[str, Sequence[int]],
    fold_types: Collection[int] = FOLD_INT32,
) -> tuple[bytes, list[str]]:
    """``model`` with constant ``DequantizeLinear`` of ``fold_types`` folded and conflicting
    dimension names renamed for ``profile`` (input name → shape; ``more_profiles`` are other
    shapes of the same profile, e.g. min and max), and one line per change. When nothing
    changes: the very same ``model`` object and ``[]``. WireError on bytes that are not a model."""
    folded, outputs = fold_constant_dequantize(model, fold_types)
    renamed, lines = rename_dim_params(folded, profile, *more_profiles)
    notes = [f"DequantizeLinear of a constant folded into float32 {name!r}" for name in outputs]
    notes += lines
    return (renamed, notes) if notes else (model, [])


def prepared_onnx(
    request: BuildRequest, on_progress: Callable[[float, str], None] | None = None
) -> Path:
    """The ONNX file to build ``request`` from with TensorRT: ``request.onnx_path`` itself when
    :func:`prepare_for_tensorrt` (with the min, opt and max shapes of ``request.config.shapes``)
    changes nothing, else the rewritten model, written to ``<output>.prepared.onnx`` beside the
    build output (the caller removes it after the build). What changed goes to the log and, in
    short, to ``on_progress(0.0, "prepared for TensorRT: ...")``.

    Never raises for the model: a file it cannot read or rewrite is built as it is, so that
    TensorRT's parser reports what is wrong with it in its own words."""
    shapes = request.config.shapes
    profiles = [{s.input: s.opt for s in shapes}, {s.input: s.min for s in shapes}]
    profiles.append({s.input: s.max for s in shapes})
    target = request.output_path.with_name(request.output_path.name + PREPARED_SUFFIX)
    try:
        prepared, notes = prepare_for_tensorrt(request.onnx_path.read_bytes(), *profiles)
        if notes:
            target.write_bytes(prepared)
    except (OSError, ValueError) as exc:  # WireError is a ValueError
        log.warning(
            "building %s as it is: cannot prepare it for TensorRT: %s", request.onnx_path, exc
        )
        with contextlib.suppress(OSError):
            target.unlink(missing_ok=True)
        return request.onnx_path
    if not notes:
        return request.onnx_path
    log.info("prepared %s for TensorRT as %s:", request.onnx_path, target)
    for note in notes:
        log.info("  %s", note)
    if on_progress is not None:
        more = f" (and {len(notes) - _SHOWN} more)" if len(notes) > _SHOWN else ""
        on_progress(0.0, f"prepared for TensorRT: {'; '.join(notes[:_SHOWN])}{more}")
    return target
