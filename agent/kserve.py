"""KServe v2 JSON tensors ↔ numpy arrays, checked against a model's inputs (pure, no I/O).

Every check raises InvalidInputError with a message that names the tensor and what was expected,
so a client can fix its request from the 400 alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agent.errors import InvalidInputError
from agent.runtime import KSERVE_TO_NUMPY, NUMPY_TO_KSERVE, TensorSpec

_END = object()


def _flatten(data: Any) -> list[Any]:
    if not isinstance(data, list):
        return [data]
    flat: list[Any] = []
    stack: list[Any] = [iter(data)]
    while stack:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
        elif isinstance(item, list):
            stack.append(iter(item))
        else:
            flat.append(item)
    return flat


def _check_values(values: list[Any], datatype: str, name: str) -> None:
    if datatype == "BOOL":
        ok = all(isinstance(v, bool) for v in values)
        expected = "true/false"
    elif datatype.startswith(("INT", "UINT")):
        ok = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
        expected = "integers"
    else:
        ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        expected = "numbers"
    if not ok:
        raise InvalidInputError(f"input {name!r}: data must be {expected} for datatype {datatype}")


def _shape_of(raw: Any, name: str) -> tuple[int, ...]:
    if not isinstance(raw, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in raw
    ):
        raise InvalidInputError(f"input {name!r}: shape must be a list of non-negative integers")
    return tuple(raw)


def _fits(shape: tuple[int, ...], spec: tuple[int, ...]) -> bool:
    return len(shape) == len(spec) and all(s in (d, -1) for d, s in zip(shape, spec, strict=True))


def _decode_tensor(raw: Any, specs: Mapping[str, TensorSpec]) -> tuple[str, np.ndarray]:
    if not isinstance(raw, dict):
        raise InvalidInputError("each entry of 'inputs' must be an object")
    missing = [k for k in ("name", "shape", "datatype", "data") if k not in raw]
    if missing:
        raise InvalidInputError(f"input is missing {', '.join(repr(k) for k in missing)}")
    name = raw["name"]
    spec = specs.get(name) if isinstance(name, str) else None
    if spec is None:
        raise InvalidInputError(
            f"unknown input {name!r}; the model takes {', '.join(repr(n) for n in specs)}"
        )
    if raw["datatype"] != spec.datatype:
        raise InvalidInputError(
            f"input {name!r}: datatype {raw['datatype']!r} given, the model takes {spec.datatype}"
        )
    shape = _shape_of(raw["shape"], name)
    if not _fits(shape, spec.shape):
        wanted = [d if d >= 0 else "?" for d in spec.shape]
        raise InvalidInputError(f"input {name!r}: shape {list(shape)} given, expected {wanted}")
    values = _flatten(raw["data"])
    count = math.prod(shape)
    if len(values) != count:
        raise InvalidInputError(
            f"input {name!r}: {len(values)} data values given, shape {list(shape)} needs {count}"
        )
    _check_values(values, spec.datatype, name)
    try:
        array = np.array(values, dtype=KSERVE_TO_NUMPY[spec.datatype]).reshape(shape)
    except (OverflowError, ValueError) as exc:
        raise InvalidInputError(f"input {name!r}: {exc}") from exc
    return name, array


def decode_request(body: Any, inputs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
    """The feeds of a KServe v2 infer request body, checked against ``inputs``."""
    if not isinstance(body, dict) or not isinstance(body.get("inputs"), list):
        raise InvalidInputError("request body must be an object with an 'inputs' list")
    specs = {spec.name: spec for spec in inputs}
    feeds: dict[str, np.ndarray] = {}
    for raw in body["inputs"]:
        name, array = _decode_tensor(raw, specs)
        if name in feeds:
            raise InvalidInputError(f"input {name!r} is given twice")
        feeds[name] = array
    absent = [name for name in specs if name not in feeds]
    if absent:
        raise InvalidInputError(f"missing input {', '.join(repr(n) for n in absent)}")
    return feeds


def requested_outputs(body: Mapping[str, Any], outputs: Sequence[TensorSpec]) -> list[str]:
    """Names of the outputs to return: those the request lists, or all of them."""
    known = [spec.name for spec in outputs]
    wanted = body.get("outputs")
    if wanted is None:
        return known
    if not isinstance(wanted, list) or not all(isinstance(o, dict) for o in wanted):
        raise InvalidInputError("'outputs' must be a list of objects with a 'name'")
    names = [o.get("name") for o in wanted]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidInputError(
            f"unknown output {unknown[0]!r}; the model gives {', '.join(repr(n) for n in known)}"
        )
    return [str(n) for n in names]


def encode_outputs(results: Mapping[str, np.ndarray], names: Sequence[str]) -> list[dict[str, Any]]:
    """KServe v2 output tensors (flat ``data``) for ``names``, in that order."""
    encoded = []
    for name in names:
        array = results[name]
        encoded.append(
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": NUMPY_TO_KSERVE.get(array.dtype, str(array.dtype)),
                "data": array.reshape(-1).tolist(),
            }
        )
    return encoded
