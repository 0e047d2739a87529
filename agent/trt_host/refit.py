"""New weights from an ONNX model into a refittable engine, in place (docs/tensorrt.md#refit).

Route per release (:attr:`~.versions.Capabilities.refit_route`):

- >= 10.0: ``trt.Refitter`` + ``trt.OnnxParserRefitter.refit_from_bytes`` (the parser matches
  the ONNX initializers to the engine's weights itself);
- 8.x/9.x: ``trt.Refitter.set_named_weights`` with the ONNX initializers read by
  :mod:`.onnx_weights` (the 8.x ONNX parser names refittable weights after the initializers);
  weights the parser derived under other names (e.g. folded BatchNorm) cannot be refitted that way
  and show as missing: :class:`RefitError` names them and the engine keeps its old weights.

On 8.x, ``trt.Weights(array)`` matches the array's dtype by identity with numpy's own dtype
objects (NVIDIA's utils.cpp: ``type.is(py::dtype("f4"))``, same at 8.5.2, 8.6 and 10.x), so the
arrays handed over always carry ``np.dtype(name)``; an equal but distinct dtype object (a byte-order
copy) is refused as "Could not implicitly convert NumPy data type" (seen on TensorRT 8.5.2 and
8.6.0 on the H200 test host, under NumPy 2.5 and 1.26).

The engine must have been built with ``BuildOptions(refittable=True)`` (``BuilderFlag.REFIT``).
The caller guarantees no inference runs on the engine meanwhile.
"""

from __future__ import annotations

from typing import Any, List

import numpy as np

from .engine import Engine
from .onnx_weights import initializers
from .versions import REFIT_ONNX_REFITTER


class RefitError(RuntimeError):
    """The refit was refused; the message carries TensorRT's own words."""


def _reason(engine: Engine) -> str:
    return "; ".join(engine.logger.take_errors()) or "no reason logged"


def refit(engine: Engine, onnx: bytes) -> None:
    """Replace ``engine``'s weights with ``onnx``'s (same topology); RefitError if refused."""
    trt = engine.trt
    if not engine.refittable:
        raise RefitError("the engine was not built refittable (BuildOptions.refittable)")
    engine.logger.begin()
    refitter = trt.Refitter(engine.engine, engine.logger)
    keep: List[Any] = []
    if engine.caps.refit_route == REFIT_ONNX_REFITTER:
        parser = trt.OnnxParserRefitter(refitter, engine.logger)
        if not parser.refit_from_bytes(onnx):
            errors = [str(parser.get_error(i)) for i in range(int(parser.num_errors))]
            raise RefitError(
                "TensorRT cannot refit from the new ONNX (topology changed?): "
                + ("; ".join(errors) or _reason(engine))
            )
        keep.append(parser)
    else:
        weights = initializers(onnx)
        for name in refitter.get_all_weights():
            found = weights.get(str(name))
            if found is not None:
                array = np.ascontiguousarray(found, dtype=np.dtype(found.dtype.name))
                wrapped = trt.Weights(array)
                keep.extend((array, wrapped))
                if not refitter.set_named_weights(str(name), wrapped):
                    raise RefitError("TensorRT refused weights %r: %s" % (name, _reason(engine)))
    missing = list(refitter.get_missing_weights())
    if missing:
        raise RefitError("refit lacks weights: " + ", ".join(str(m) for m in missing))
    if not refitter.refit_cuda_engine():
        raise RefitError("TensorRT refit_cuda_engine failed: " + _reason(engine))
    del keep
