"""KServe v2 JSON tensors: decoding checked against the model, clear errors, flat outputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from agent.errors import InvalidInputError
from agent.runtimes.base import TensorSpec
from agent.serving.kserve import decode_request, encode_outputs, requested_outputs

IMAGE = TensorSpec("image", "FP32", (1, 2, 2))
COUNT = TensorSpec("count", "INT64", (-1,))


def body(**tensor: Any) -> dict[str, Any]:
    base = {"name": "image", "shape": [1, 2, 2], "datatype": "FP32", "data": [1, 2, 3, 4.5]}
    return {"inputs": [{**base, **tensor}]}


def test_flat_and_nested_data_decode_to_the_same_array() -> None:
    flat = decode_request(body(), [IMAGE])["image"]
    nested = decode_request(body(data=[[[1, 2], [3, 4.5]]]), [IMAGE])["image"]
    assert flat.dtype == np.float32
    assert flat.shape == (1, 2, 2)
    np.testing.assert_array_equal(flat, nested)


def test_dynamic_dimension_accepts_any_length() -> None:
    feeds = decode_request(
        {"inputs": [{"name": "count", "shape": [3], "datatype": "INT64", "data": [1, 2, 3]}]},
        [COUNT],
    )
    assert feeds["count"].tolist() == [1, 2, 3]


@pytest.mark.parametrize(
    ("request_body", "message"),
    [
        (body(name="img"), "unknown input 'img'; the model takes 'image'"),
        (body(datatype="FP64"), "input 'image': datatype 'FP64' given, the model takes FP32"),
        (body(shape=[1, 4]), "input 'image': shape [1, 4] given, expected [1, 2, 2]"),
        (body(data=[1, 2, 3]), "input 'image': 3 data values given, shape [1, 2, 2] needs 4"),
        (body(data=[1, 2, "x", 4]), "data must be numbers for datatype FP32"),
        (body(shape=[1, -2, 2]), "shape must be a list of non-negative integers"),
        ({"inputs": []}, "missing input 'image'"),
        ({"input": []}, "an 'inputs' list"),
        ({"inputs": [body()["inputs"][0]] * 2}, "given twice"),
        ({"inputs": [{"name": "image"}]}, "missing 'shape', 'datatype', 'data'"),
    ],
)
def test_bad_requests_are_refused_with_the_reason(request_body: Any, message: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        decode_request(request_body, [IMAGE])
    assert message in str(info.value)


def test_integers_refuse_fractions() -> None:
    bad = {"inputs": [{"name": "count", "shape": [1], "datatype": "INT64", "data": [1.5]}]}
    with pytest.raises(InvalidInputError, match="integers"):
        decode_request(bad, [COUNT])


def test_outputs_are_flat_with_shape_and_datatype() -> None:
    results = {"p": np.arange(6, dtype=np.float32).reshape(2, 3)}
    (out,) = encode_outputs(results, ["p"])
    assert out == {"name": "p", "shape": [2, 3], "datatype": "FP32", "data": [0, 1, 2, 3, 4, 5]}


def test_requested_outputs_default_to_all_and_refuse_unknown_names() -> None:
    specs = [TensorSpec("p", "FP32", (1,)), TensorSpec("q", "FP32", (1,))]
    assert requested_outputs({}, specs) == ["p", "q"]
    assert requested_outputs({"outputs": [{"name": "q"}]}, specs) == ["q"]
    with pytest.raises(InvalidInputError, match="unknown output 'r'"):
        requested_outputs({"outputs": [{"name": "r"}]}, specs)
