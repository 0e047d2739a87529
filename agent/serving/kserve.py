"""KServe v2 JSON tensors ↔ numpy arrays, checked against a model's inputs (pure, no I/O).

Both encodings of the protocol: JSON ``data`` and the *binary tensor data extension*: the body
is a JSON header of ``Inference-Header-Content-Length`` bytes followed by the raw little-endian
bytes of every input whose ``parameters.binary_data_size`` is set, in the order of ``inputs``;
outputs asked with ``parameters.binary_data: true`` (or the request parameter
``binary_data_output: true``) come back the same way. With the system shared-memory extension
(:mod:`agent.serving.shared_memory`), an input or output names a registered region instead of
carrying
data.

Every check raises InvalidInputError with a message that names the tensor and what was expected,
so a client can fix its request from the 400 alone.

JSON tensors cost no Python work per element: a ``data`` array of numbers arrives already read
into an array (:class:`NumberData`, by :mod:`agent.serving.infer_body`) and is cast to the
model's dtype; any other ``data`` (a list from the general decoder) is type-checked with one
``set(map(type, ...))`` and converted by numpy; both give the same tensor and the same errors.
Responses are written by orjson straight from the arrays. Floats that are not finite have no
JSON number: they are written as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``,
which the numpy conversion of KServe clients (tritonclient's ``as_numpy``,
``np.array(data, dtype)``) reads back as the same values; bare ``NaN`` tokens would make the
whole body invalid for strict JSON parsers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:  # numpy loads with the first model, not at agent start (idle RSS)
    import numpy as np

from agent.errors import InvalidInputError
from agent.runtimes.base import KSERVE_TO_NUMPY, NUMPY_TO_KSERVE, TensorSpec
from agent.serving.shared_memory import SharedMemoryRegions, TensorRef, tensor_ref

SHM_OFF = (
    "client shared memory is off on this agent: start it with JETFLEET_SERVE_SHARED_MEMORY=true"
)

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


_ALLOWED: dict[str, tuple[frozenset[type], str]] = {
    "BOOL": (frozenset({bool}), "true/false"),
    "INT": (frozenset({int}), "integers"),
    "FLOAT": (frozenset({int, float}), "numbers"),
}


def _flat_values(data: Any, datatype: str, name: str) -> list[Any]:
    """``data`` as one flat list of values of the datatype's JSON kind (a parsed document holds
    exact types: ``bool`` is never taken for ``int``)."""
    values = data if type(data) is list else [data]
    kinds = set(map(type, values))
    if list in kinds:  # nested row-major lists: flattened without recursion
        values = _flatten(values)
        kinds = set(map(type, values))
    key = "BOOL" if datatype == "BOOL" else "INT" if "INT" in datatype else "FLOAT"
    allowed, expected = _ALLOWED[key]
    if not kinds <= allowed:
        raise InvalidInputError(f"input {name!r}: data must be {expected} for datatype {datatype}")
    return values


class NumberData:
    """A ``data`` array of JSON numbers read straight into ``values`` (float64 for FP datatypes,
    int64 for INT, uint64 for UINT: the request's ``datatype``), flattened row-major as nested
    lists are; it stands for the list of Python numbers the general decoder would give."""

    __slots__ = ("datatype", "values")

    def __init__(self, datatype: str, values: np.ndarray) -> None:
        self.datatype = datatype
        self.values = values

    def __repr__(self) -> str:
        return f"NumberData({self.datatype!r}, {len(self.values)} values)"

    def cast(self, dtype: str) -> np.ndarray | None:
        """The values as ``dtype``, or None when some integer is outside its range (numpy's
        conversion of the Python numbers says how, as it does for a list)."""
        import numpy as np

        values, target = self.values, np.dtype(dtype)
        if target.kind in "iu" and not np.can_cast(values.dtype, target):
            if values.dtype.kind not in "iu":
                return None
            info = np.iinfo(target)
            if values.size and (values.min() < info.min or values.max() > info.max):
                return None
        return values.astype(target)


def _shape_of(raw: Any, name: str) -> tuple[int, ...]:
    if not isinstance(raw, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in raw
    ):
        raise InvalidInputError(f"input {name!r}: shape must be a list of non-negative integers")
    return tuple(raw)


def _fits(shape: tuple[int, ...], spec: tuple[int, ...]) -> bool:
    return len(shape) == len(spec) and all(s in (d, -1) for d, s in zip(shape, spec, strict=True))


def _decode_tensor(
    raw: Any, specs: Mapping[str, TensorSpec], binary: bytes | bytearray | memoryview | None = None
) -> tuple[str, np.ndarray]:
    import numpy as np

    if not isinstance(raw, dict):
        raise InvalidInputError("each entry of 'inputs' must be an object")
    needed = (
        ("name", "shape", "datatype")
        if binary is not None
        else ("name", "shape", "datatype", "data")
    )
    missing = [k for k in needed if k not in raw]
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
    if binary is not None:
        dtype = np.dtype(KSERVE_TO_NUMPY[spec.datatype]).newbyteorder("<")
        if len(binary) != math.prod(shape) * dtype.itemsize:
            raise InvalidInputError(
                f"input {name!r}: {len(binary)} binary bytes given, shape {list(shape)} of "
                f"{spec.datatype} needs {math.prod(shape) * dtype.itemsize}"
            )
        array = np.frombuffer(binary, dtype=dtype).reshape(shape)
        return name, array.astype(dtype.newbyteorder("="), copy=False)
    data = raw["data"]
    read = data if type(data) is NumberData and data.datatype == spec.datatype else None
    values: Any = read.values if read is not None else _flat_values(data, spec.datatype, name)
    count = math.prod(shape)
    if len(values) != count:
        raise InvalidInputError(
            f"input {name!r}: {len(values)} data values given, shape {list(shape)} needs {count}"
        )
    if read is not None:
        cast = read.cast(KSERVE_TO_NUMPY[spec.datatype])
        if cast is not None:
            return name, cast.reshape(shape)
        values = read.values.tolist()
    try:
        array = np.array(values, dtype=KSERVE_TO_NUMPY[spec.datatype]).reshape(shape)
    except (OverflowError, ValueError) as exc:
        raise InvalidInputError(f"input {name!r}: {exc}") from exc
    return name, array


def _binary_size(raw: Any) -> int | None:
    params = raw.get("parameters") if isinstance(raw, dict) else None
    if not isinstance(params, dict) or "binary_data_size" not in params:
        return None
    size = params["binary_data_size"]
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise InvalidInputError("parameters.binary_data_size must be a non-negative integer")
    return size


def split_body(raw: bytes, header_length: str | None) -> tuple[bytes, bytes]:
    """(JSON header, binary tail) of a request body; the header is all of it without the header."""
    if header_length is None:
        return raw, b""
    try:
        n = int(header_length)
    except ValueError as exc:
        raise InvalidInputError("Inference-Header-Content-Length must be an integer") from exc
    if not 0 <= n <= len(raw):
        raise InvalidInputError(
            f"Inference-Header-Content-Length {n} is outside the body of {len(raw)} bytes"
        )
    return raw[:n], raw[n:]


def decode_request(
    body: Any,
    inputs: Sequence[TensorSpec],
    binary: bytes = b"",
    regions: SharedMemoryRegions | None = None,
) -> dict[str, np.ndarray]:
    """The feeds of a KServe v2 infer request body (its binary tail, its shared memory), checked.

    An input in shared memory is a view of the region, not a copy.
    """

    if not isinstance(body, dict) or not isinstance(body.get("inputs"), list):
        raise InvalidInputError("request body must be an object with an 'inputs' list")
    specs = {spec.name: spec for spec in inputs}
    feeds: dict[str, np.ndarray] = {}
    offset = 0
    for raw in body["inputs"]:
        size = _binary_size(raw)
        ref = tensor_ref(raw)
        chunk: bytes | bytearray | memoryview | None = None
        if ref is not None:
            if size is not None or (isinstance(raw, dict) and "data" in raw):
                raise InvalidInputError(
                    f"input {raw.get('name')!r}: shared memory and data (or binary_data_size) "
                    "are given together; give one"
                )
            if regions is None:
                raise InvalidInputError(SHM_OFF)
            chunk = regions.read(ref)
        elif size is not None:
            if offset + size > len(binary):
                raise InvalidInputError(
                    f"binary data ends before input {raw.get('name')!r}: "
                    f"{len(binary)} bytes after the JSON header, {offset + size} needed"
                )
            chunk, offset = binary[offset : offset + size], offset + size
        name, array = _decode_tensor(raw, specs, chunk)
        if name in feeds:
            raise InvalidInputError(f"input {name!r} is given twice")
        feeds[name] = array
    if offset != len(binary):
        raise InvalidInputError(
            f"{len(binary) - offset} binary bytes after the JSON header belong to no input"
        )
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


_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}
_ORJSON_NUMPY = frozenset(KSERVE_TO_NUMPY.values())
"""dtypes orjson writes from an array itself (OPT_SERIALIZE_NUMPY); others go through tolist."""


def json_data(array: np.ndarray) -> Any:
    """The flat ``data`` of ``array`` for orjson (with OPT_SERIALIZE_NUMPY): the array itself
    when orjson can write it as it is, else a list with non-finite floats as strings."""
    import numpy as np

    flat = np.ascontiguousarray(array).reshape(-1)
    finite = array.dtype.kind != "f" or bool(np.isfinite(flat).all())
    if finite and flat.dtype.name in _ORJSON_NUMPY and flat.dtype.isnative:
        return flat
    values = flat.tolist()
    if not finite:
        values = [v if math.isfinite(v) else _NON_FINITE.get(v, "NaN") for v in values]
    return values


def dumps(doc: Any) -> bytes:
    """Compact JSON bytes of ``doc``; numpy arrays in it are written as lists."""
    return orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)


def encode_outputs(results: Mapping[str, np.ndarray], names: Sequence[str]) -> list[dict[str, Any]]:
    """KServe v2 output tensors (flat ``data``, plain lists as the body carries them) for
    ``names``, in that order."""
    encoded = []
    for name in names:
        array = results[name]
        encoded.append(
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": NUMPY_TO_KSERVE.get(array.dtype.name, str(array.dtype)),
                "data": orjson.loads(dumps(json_data(array))),
            }
        )
    return encoded


def shared_memory_outputs(body: Mapping[str, Any]) -> dict[str, TensorRef]:
    """Outputs the request asks to be written into shared-memory regions, by name."""
    refs = {}
    for wanted in body.get("outputs") or []:
        ref = tensor_ref(wanted)
        if ref is not None:
            refs[str(wanted.get("name"))] = ref
    return refs


def binary_outputs(body: Mapping[str, Any], names: Sequence[str]) -> set[str]:
    """Outputs to return as binary data (per-output or request-wide ``binary_data`` flags)."""
    params = body.get("parameters")
    if isinstance(params, dict) and params.get("binary_data_output") is True:
        chosen = set(names)
    else:
        chosen = set()
    for wanted in body.get("outputs") or []:
        p = wanted.get("parameters") if isinstance(wanted, dict) else None
        if isinstance(p, dict) and "binary_data" in p:
            name = str(wanted.get("name"))
            if p["binary_data"] is True:
                chosen.add(name)
            else:
                chosen.discard(name)
    return chosen


def encode_response(
    response: dict[str, Any],
    results: Mapping[str, np.ndarray],
    names: Sequence[str],
    binary: set[str],
    shared: Mapping[str, TensorRef] | None = None,
    regions: SharedMemoryRegions | None = None,
) -> tuple[bytes, int | None]:
    """The response body and, when any output is binary, the JSON header's length.

    Outputs in ``shared`` are written into their regions and carry no data.
    """
    import numpy as np

    shared = shared or {}
    if shared and regions is None:
        raise InvalidInputError(SHM_OFF)

    outputs = []
    tail: list[bytes] = []
    for name in names:
        array = results[name]
        entry: dict[str, Any] = {
            "name": name,
            "shape": list(array.shape),
            "datatype": NUMPY_TO_KSERVE.get(array.dtype.name, str(array.dtype)),
        }
        if name in shared and regions is not None:
            ref = shared[name]
            raw = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
            regions.write(ref, raw)
            entry["parameters"] = {
                "shared_memory_region": ref.region,
                "shared_memory_byte_size": len(raw),
                "shared_memory_offset": ref.offset,
            }
        elif name in binary:
            raw = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            tail.append(raw)
        else:
            entry["data"] = json_data(array)
        outputs.append(entry)
    header = dumps({**response, "outputs": outputs})
    if not tail:
        return header, None
    return header + b"".join(tail), len(header)
