"""Refit on TensorRT 8.x hands ``trt.Weights(array)`` the ONNX initializers, and 8.x matches the
array's dtype by identity with numpy's own dtype objects (NVIDIA's utils.cpp,
``type.is(py::dtype("f4"))``): an equal but distinct dtype object is refused ("Could not
implicitly convert NumPy data type", seen on real 8.5.2 and 8.6.0). The weights reader must hand
out numpy's canonical dtype objects."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from agent.trt_host.onnx_weights import initializers


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int8", "uint8", "bool"])
def test_initializers_carry_numpys_own_dtype_objects(dtype: str) -> None:
    value = np.arange(6).reshape(2, 3).astype(dtype)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
        [numpy_helper.from_array(value, "w")],
    )
    weights = initializers(helper.make_model(graph).SerializeToString())
    assert weights["w"].dtype is np.dtype(dtype)
    np.testing.assert_array_equal(weights["w"], value)
