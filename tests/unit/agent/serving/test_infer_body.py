"""Infer bodies read by simdjson give the general decoder's tensors and errors, body for body."""

from __future__ import annotations

import json
import math
import sys
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.errors import InvalidInputError
from agent.runtimes.base import KSERVE_TO_NUMPY, TensorSpec
from agent.serving.infer_body import load_infer_body
from agent.serving.kserve import NumberData, decode_request, requested_outputs
from shared.codec import MAX_JSON_DEPTH, JSONError, load_json

Outcome = tuple[str, ...] | dict[str, tuple[str, tuple[int, ...], bytes]]


def outcome(load: Any, raw: bytes, specs: list[TensorSpec]) -> tuple[Outcome, set[str]]:
    """The feeds (dtype, shape, bytes) or the error, and the warnings on the way (which ones,
    not how many: numpy warns per number converted from a list, once per array cast)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            body = load(raw)
            if not isinstance(body, dict):
                return ("not an object",), set()
            feeds = decode_request(body, specs)
        except (JSONError, InvalidInputError) as exc:
            result: Outcome = (type(exc).__name__, str(exc))
        else:
            result = {k: (v.dtype.str, v.shape, v.tobytes()) for k, v in feeds.items()}
    return result, {f"{w.category.__name__}: {w.message}" for w in caught}


def skeleton(load: Any, raw: bytes) -> str:
    """The document with each input's ``data`` left out (the tensors compare those), as text."""
    try:
        doc = load(raw)
    except JSONError as exc:
        return str(exc)
    inputs = doc.get("inputs") if isinstance(doc, dict) else None
    if isinstance(inputs, list):
        doc = {**doc, "inputs": [{**i, "data": "-"} if isinstance(i, dict) else i for i in inputs]}
    return json.dumps(doc)


def same_as_general(raw: bytes, specs: list[TensorSpec]) -> Outcome:
    fast = outcome(load_infer_body, raw, specs)
    assert fast == outcome(load_json, raw, specs)
    assert skeleton(load_infer_body, raw) == skeleton(load_json, raw)
    return fast[0]


def tensor(name: str, shape: list[int], datatype: str, data: str, extra: str = "") -> str:
    return (
        f'{{"name":"{name}","shape":{json.dumps(shape)},"datatype":"{datatype}",'
        f'"data":{data}{extra}}}'
    )


def body(*tensors: str, extra: str = "") -> bytes:
    return f'{{"inputs":[{",".join(tensors)}]{extra}}}'.encode()


def nest(tokens: list[str], shape: list[int]) -> str:
    """Row-major nested lists of ``tokens`` for ``shape`` (flat when the count differs)."""
    if len(shape) < 2 or math.prod(shape) != len(tokens):
        return f"[{','.join(tokens)}]"
    step = len(tokens) // shape[0] if shape[0] else 0
    rows = [nest(tokens[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]
    return f"[{','.join(rows)}]"


def test_a_flat_number_array_is_read_into_an_array() -> None:
    doc = load_infer_body(body(tensor("x", [4], "FP32", "[1, 2.5, -0, 3e2]")))
    data = doc["inputs"][0]["data"]
    assert type(data) is NumberData
    assert data.values.dtype == np.float64
    assert data.values.tolist() == [1.0, 2.5, 0.0, 300.0]
    (feed,) = decode_request(doc, [TensorSpec("x", "FP32", (4,))]).values()
    assert feed.dtype == np.float32
    assert feed.tolist() == [1.0, 2.5, 0.0, 300.0]


@pytest.mark.parametrize(
    ("datatype", "data", "buffer"),
    [
        ("INT64", "[1, -2, 3]", "int64"),
        ("UINT8", "[1, 2, 3]", "uint64"),
        ("FP16", "[1]", "float64"),
    ],
)
def test_integer_and_float_datatypes_get_their_buffer(
    datatype: str, data: str, buffer: str
) -> None:
    doc = load_infer_body(body(tensor("x", [-1], datatype, data)))
    assert doc["inputs"][0]["data"].values.dtype == np.dtype(buffer)


@pytest.mark.parametrize(
    ("datatype", "data"),
    [
        ("BOOL", "[true, false]"),
        ("FP32", "[1, true]"),
        ("FP32", '[1, "NaN"]'),
        ("FP32", "[1, null]"),
        ("INT32", "[1, 2.0]"),
        ("INT64", "[1, 18446744073709551615]"),
        ("UINT64", "[-1, 2]"),
        ("BYTES", '["a", "b"]'),
    ],
)
def test_data_of_another_kind_is_the_general_list(datatype: str, data: str) -> None:
    raw = body(tensor("x", [2], datatype, data))
    assert load_infer_body(raw) == load_json(raw)


def test_the_rest_of_the_body_is_what_the_general_decoder_gives() -> None:
    raw = body(
        tensor("x", [2], "FP32", "[1, 2]", ',"parameters":{"a":[1,{"b":null}],"c":"\\u00e9"}'),
        extra=',"id":"r-1","outputs":[{"name":"y","parameters":{"binary_data":true}}],'
        '"parameters":{"binary_data_output":false,"n":-0,"big":18446744073709551615}',
    )
    fast, general = load_infer_body(raw), load_json(raw)
    assert fast["inputs"][0].pop("data").values.tolist() == general["inputs"][0].pop("data")
    assert fast == general


@pytest.mark.parametrize(
    "raw",
    [
        b'{"inputs":[{"name":"x","data":[1],"data":[2,3],"shape":[2],"datatype":"FP32"}]}',
        b'{"inputs":[],"inputs":[{"name":"x","data":[1,2],"shape":[2],"datatype":"FP32"}]}',
        b'{"inputs":[{"name":"x","data":[1,2],"shape":[2],"datatype":"FP32","a\\u0000":1}]}',
        b'{"inputs\\u0000":[],"inputs":[{"name":"x","data":[1,2],"shape":[2],"datatype":"FP32"}]}',
    ],
    ids=["repeated data", "repeated inputs", "NUL in an input key", "NUL in a body key"],
)
def test_repeated_and_nul_keys_read_as_orjson_reads_them(raw: bytes) -> None:
    assert load_infer_body(raw) == load_json(raw)
    same_as_general(raw, [TensorSpec("x", "FP32", (2,))])


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{nope",
        b"[1]",
        b'"x"',
        b'{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[NaN,Infinity]}]}',
        b'{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1e400,-1e400]}]}',
        b'{"inputs":[{"name":"x","shape":[1],"datatype":"INT64","data":[-9223372036854775809]}]}',
        b'{"inputs":[{"name":"x","shape":[1],"datatype":"INT64","data":[18446744073709551616]}]}',
        b'{"inputs":[{"name":"\\ud800","shape":[1],"datatype":"FP32","data":[1]}]}',
        b'{"inputs":[{"name":"\xed\xa0\x80","shape":[1],"datatype":"FP32","data":[1]}]}',
        b'\xef\xbb\xbf{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}',
        b'{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]} x',
    ],
)
def test_bodies_simdjson_refuses_go_to_the_general_decoder(raw: bytes) -> None:
    spec = [TensorSpec("x", "FP32", (-1,)), TensorSpec("\ud800", "FP32", (1,))]
    same_as_general(raw, spec)
    same_as_general(raw.replace(b'"FP32"', b'"INT64"'), [TensorSpec("x", "INT64", (1,))])


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH - 3, MAX_JSON_DEPTH - 2, 5_000])
def test_nested_data_keeps_the_depth_bound(levels: int) -> None:
    """The body, ``inputs`` and the input are three levels above ``data``'s outermost list."""
    raw = body(tensor("x", [1], "FP32", "[" * levels + "1" + "]" * levels))
    result = same_as_general(raw, [TensorSpec("x", "FP32", (1,))])
    if levels + 3 > MAX_JSON_DEPTH:
        assert result == ("JSONError", f"nests deeper than {MAX_JSON_DEPTH} levels")
    else:
        assert isinstance(result, dict)


def test_nested_data_reads_as_the_flat_data() -> None:
    image = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4) / 7
    spec = [TensorSpec("x", "FP32", (1, 2, 3, 4))]
    flat = body(tensor("x", [1, 2, 3, 4], "FP32", json.dumps(image.ravel().tolist())))
    nested = body(tensor("x", [1, 2, 3, 4], "FP32", json.dumps(image.tolist())))
    assert same_as_general(flat, spec) == same_as_general(nested, spec)
    assert decode_request(load_infer_body(nested), spec)["x"].tobytes() == image.tobytes()


def test_without_simdjson_every_body_takes_the_general_decoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "simdjson", None)
    raw = body(tensor("x", [2], "FP32", "[1, 2]"))
    assert load_infer_body(raw) == load_json(raw)


def test_many_inputs_and_outputs_selection() -> None:
    specs = [TensorSpec(f"x{i}", "INT32", (2,)) for i in range(40)]
    raw = body(
        *(tensor(s.name, [2], "INT32", f"[{i}, {-i}]") for i, s in enumerate(specs)),
        extra=',"outputs":[{"name":"y"}]',
    )
    feeds = same_as_general(raw, specs)
    assert isinstance(feeds, dict)
    assert len(feeds) == 40
    assert requested_outputs(load_infer_body(raw), [TensorSpec("y", "FP32", (1,))]) == ["y"]


@pytest.mark.parametrize(
    ("datatype", "data", "message"),
    [
        ("INT8", "[1, 128]", "out of bounds for int8"),
        ("UINT8", "[1, 256]", "out of bounds for uint8"),
        ("INT32", "[1, -2147483649]", "out of bounds for int32"),
        ("UINT64", "[1, -1]", "input 'x':"),
        ("INT64", "[1, 9223372036854775808]", "input 'x':"),
        ("INT16", "[1, 2, 3]", "3 data values given, shape [2] needs 2"),
        ("FP32", "[1]", "1 data values given, shape [2] needs 2"),
        ("INT16", "[1, 2.5]", "data must be integers for datatype INT16"),
        ("BOOL", "[1, 0]", "data must be true/false for datatype BOOL"),
    ],
)
def test_refusals_carry_the_general_messages(datatype: str, data: str, message: str) -> None:
    result = same_as_general(
        body(tensor("x", [2], datatype, data)), [TensorSpec("x", datatype, (2,))]
    )
    assert result[0] == "InvalidInputError"
    assert message in str(result[1])


def test_float_overflow_warns_as_the_general_conversion_does() -> None:
    raw = body(tensor("x", [2], "FP16", "[1, 70000]"))
    result, caught = outcome(load_infer_body, raw, [TensorSpec("x", "FP16", (2,))])
    assert (result, caught) == outcome(load_json, raw, [TensorSpec("x", "FP16", (2,))])
    assert caught == {"RuntimeWarning: overflow encountered in cast"}


DATATYPES = [*KSERVE_TO_NUMPY, "BYTES"]

integer_text = st.one_of(
    st.integers(-200, 300),
    st.integers(-(2**64), 2**65),
    st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, -(2**63), -(2**63) - 1, 2**53 + 1]),
).map(str)
number_text = st.one_of(
    integer_text,
    st.just("-0"),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False, width=16).map(repr),
    st.from_regex(r"-?(0|[1-9][0-9]{0,22})(\.[0-9]{1,20})?([eE][-+]?[0-9]{1,3})?", fullmatch=True),
)
rarely = st.sampled_from([False] * 9 + [True])
odd_text = st.sampled_from(
    ["true", "false", "null", '"x"', '"NaN"', "NaN", "Infinity", "-Infinity", "{}", "[]", "[1]"]
)


@st.composite
def tensors(draw: st.DrawFn, name: str) -> tuple[str, TensorSpec]:
    datatype = draw(st.sampled_from(DATATYPES))
    shape = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3))
    count = math.prod(shape) + draw(st.sampled_from([0] * 6 + [1, -1]))
    family = draw(st.sampled_from(["small ints", "ints", "numbers"] * 2 + ["odd"]))
    item = {
        "small ints": st.integers(-3, 9).map(str),
        "ints": integer_text,
        "numbers": number_text,
        "odd": st.one_of(number_text, odd_text),
    }[family]
    tokens = draw(st.lists(item, min_size=max(count, 0), max_size=max(count, 0)))
    data = nest(tokens, shape) if draw(st.booleans()) else f"[{', '.join(tokens)}]"
    if draw(rarely):
        data = draw(st.sampled_from(["1", '"x"', "{}", "null"]))
    extra = draw(st.sampled_from(["", ',"parameters":{"p":[1,2]}', ',"data":[0]']))
    served = datatype in KSERVE_TO_NUMPY and not draw(rarely)  # models take no BYTES
    spec_type = datatype if served else draw(st.sampled_from(list(KSERVE_TO_NUMPY)))
    spec_shape = tuple(-1 if draw(st.booleans()) else d for d in shape)
    return tensor(name, shape, datatype, data, extra), TensorSpec(name, spec_type, spec_shape)


@st.composite
def requests(draw: st.DrawFn) -> tuple[bytes, list[TensorSpec]]:
    drawn = [draw(tensors(f"in{i}")) for i in range(draw(st.integers(1, 3)))]
    extra = draw(st.sampled_from(["", ',"outputs":[{"name":"y"}]', ',"parameters":{"a":1}']))
    raw = body(*(text for text, _ in drawn), extra=extra)
    if draw(rarely):
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw, [spec for _, spec in drawn]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_any_request_decodes_as_the_general_decoder_decodes_it(
    drawn: tuple[bytes, list[TensorSpec]],
) -> None:
    same_as_general(*drawn)
