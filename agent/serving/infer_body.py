"""Infer request bodies: ``data`` arrays of numbers read by simdjson straight into numpy.

A 1x3x224x224 FP32 image as JSON tensors is a 3.1 MB body of 150,528 numbers. The general
decoder (:func:`shared.codec.load_json`: orjson, then the depth walk) makes a Python float of
each, which :mod:`agent.serving.kserve` then type-checks and hands to numpy: ~14 ms in the
server on the 2-core VM. Here simdjson parses the body and copies each input's ``data`` array
into a float64, int64 or uint64 buffer in C (:class:`agent.serving.kserve.NumberData`, chosen by
the input's ``datatype``); the rest of the document (names, shapes, parameters, ``outputs``)
becomes the same dicts and lists as before: ~3.4 ms for that body, nearly all of it simdjson
turning 150,528 decimal numbers into doubles (bench/results/serving_overhead.md).

The result is what :func:`shared.codec.load_json` gives, number for number, error for error:

* any body simdjson refuses (not JSON, bare ``NaN``/``Infinity``, integers past 64 bits, floats
  past double, invalid UTF-8, a top level that is not an object) goes to the general decoder,
  which reads or refuses it with the same message as before;
* a body with more ``[`` and ``{`` bytes than :data:`~shared.codec.MAX_JSON_DEPTH` (nested
  ``data`` lists, many inputs) goes there too: no document nests deeper than it has containers,
  so below that count the depth bound holds without a walk, and above it the general decoder's
  walk decides;
* ``data`` that is not all numbers of its datatype's kind (booleans, strings, fractions for an
  integer type, BOOL and unknown datatypes) becomes the list the general decoder would give, so
  :mod:`agent.serving.kserve` refuses it with the same message; objects with a repeated key
  are read whole, the last value winning, as orjson does.

Each thread keeps one :class:`simdjson.Parser` and reuses it (for bodies up to
:data:`REUSED_BELOW`); its documents never outlive the read, so it is never parsed into while
one is alive.
"""

from __future__ import annotations

import threading
from typing import Any

from agent.serving.kserve import NumberData
from shared.codec import MAX_JSON_DEPTH, load_json

_BUFFER_TYPES = {
    **{f"FP{bits}": ("d", "float64") for bits in (16, 32, 64)},
    **{f"INT{bits}": ("i", "int64") for bits in (8, 16, 32, 64)},
    **{f"UINT{bits}": ("u", "uint64") for bits in (8, 16, 32, 64)},
}
"""KServe datatype → (simdjson buffer type, its numpy dtype) for the number arrays read in C."""


REUSED_BELOW = 4 << 20
"""Bodies up to this size (a 1x3x224x224 FP32 image is 3.1 MB) are parsed by the thread's kept
parser, which then holds about two and a half times the largest of them (its copy of the body,
the tape, the structural indexes: ~8 MB for that image). A fresh parser per request cost ~1,600
page faults and twice the parse time for that body in the server's thread on the 2-core VM
(glibc gives a thread's large blocks back to the system when they are freed)."""

_kept = threading.local()


def load_infer_body(raw: bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The parsed infer request body, as :func:`shared.codec.load_json` would give it except
    that ``inputs[i].data`` arrays of numbers are :class:`NumberData`; the same
    :class:`shared.codec.JSONError` for a body that is not JSON or nests too deep."""
    try:
        import simdjson  # ~3 MB of RSS: loaded by the first infer request, not at agent start
    except ImportError:  # a dependency of the agent extra; an install without it is only slower
        return load_json(raw, max_depth)
    if not _containers_at_most(raw, max_depth):
        return load_json(raw, max_depth)
    # The kept parser is taken out while in use and put back only once every proxy into its
    # document is gone (they live in _read's frame), so it is never reused under them.
    parser = getattr(_kept, "parser", None) or simdjson.Parser()
    _kept.parser = None
    read = _read(parser, raw)
    if len(raw) <= REUSED_BELOW:
        _kept.parser = parser
    return load_json(raw, max_depth) if read is None else read


def _read(parser: Any, raw: bytes) -> dict[str, Any] | None:
    """The body read through simdjson, or None where the general decoder must decide."""
    import simdjson

    try:
        doc = parser.parse(raw)
    except (ValueError, TypeError, RuntimeError):  # what simdjson raises for a body it refuses
        return None
    if not isinstance(doc, simdjson.Object):
        return None
    fields = _fields(doc)
    if fields is None:
        return doc.as_dict()
    body = {}
    for key, value in fields:
        if key == "inputs" and isinstance(value, simdjson.Array):
            body[key] = [_input(entry) for entry in value]
        else:
            body[key] = _python(value)
    return body


def _containers_at_most(raw: bytes, limit: int) -> bool:
    """Whether ``raw`` has at most ``limit`` ``[`` and ``{`` bytes (each found by memchr)."""
    found = 0
    for opening in (b"[", b"{"):
        at = raw.find(opening)
        while at >= 0:
            found += 1
            if found > limit:
                return False
            at = raw.find(opening, at + 1)
    return True


def _fields(obj: Any) -> list[tuple[str, Any]] | None:
    """(key, value) pairs of a simdjson object, values left as proxies; None when a key repeats
    or holds a NUL (simdjson looks keys up as C strings), for the caller to read it whole."""
    keys = list(obj)
    if len(set(keys)) != len(keys) or any("\x00" in key for key in keys):
        return None
    return [(key, obj[key]) for key in keys]


def _python(value: Any) -> Any:
    """A simdjson value as the plain dicts, lists and scalars orjson gives."""
    import simdjson

    if isinstance(value, simdjson.Object):
        return value.as_dict()
    if isinstance(value, simdjson.Array):
        return value.as_list()
    return value


def _input(entry: Any) -> Any:
    import simdjson

    fields = _fields(entry) if isinstance(entry, simdjson.Object) else None
    if fields is None:
        return _python(entry)
    tensor = {}
    datatype = dict(fields).get("datatype")
    for key, value in fields:
        if key == "data" and isinstance(value, simdjson.Array) and isinstance(datatype, str):
            tensor[key] = _numbers(value, datatype)
        else:
            tensor[key] = _python(value)
    return tensor


def _numbers(array: Any, datatype: str) -> Any:
    """``array`` as NumberData when every item is a number of ``datatype``'s kind, else the list
    the general decoder gives (for kserve to refuse or convert as it always has)."""
    import numpy as np

    kind = _BUFFER_TYPES.get(datatype)
    if kind is None:
        return array.as_list()
    of_type, dtype = kind
    try:
        buffer = array.as_buffer(of_type=of_type)
    except (TypeError, ValueError):  # an item of another kind: a bool, a string, a fraction
        return array.as_list()
    return NumberData(datatype, np.frombuffer(buffer, dtype=dtype))
