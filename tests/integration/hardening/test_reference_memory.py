"""On a real controller: ``--shape x=1x1000000000`` made the reference child allocate
7.7 GB before any size check. A given shape is now bounded where it is read (400 before anything
runs), and a model that allocates without bound on a small input meets its child's address-space
limit: the push is stored without references, saying why, and the server is unharmed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from onnx import TensorProto, helper

from controller.demo.sample_models import classifier
from controller.server import Controller
from tests.integration.hardening.conftest import open_controller


@pytest.fixture
def controller(mosquitto: str, tmp_path: Path) -> Iterator[Controller]:
    with open_controller(mosquitto, tmp_path, f"refmem-{uuid.uuid4().hex[:10]}/v1") as c:
        yield c


def expander(elements: int) -> bytes:
    """One FP32 input of one element, expanded to ``elements`` (16 GiB at 2**32)."""
    graph = helper.make_graph(
        [helper.make_node("Expand", ["x", "shape"], ["y"])],
        "expander",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
        [helper.make_tensor("shape", TensorProto.INT64, [1], [elements])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_a_given_shape_of_a_billion_elements_is_refused_before_anything_runs(
    api: httpx.Client,
) -> None:
    refused = api.put(
        "/api/v1/models/cls/versions/1",
        params={"shape": "image=1x3x20000x20000"},
        content=classifier(),
    )
    assert refused.status_code == 400, refused.text
    assert "1,200,000,000 elements" in refused.json()["detail"]
    assert api.get("/api/v1/models/cls/versions/1").status_code == 404


def test_a_model_that_allocates_16_gib_meets_its_childs_limit(api: httpx.Client) -> None:
    pushed = api.put("/api/v1/models/big/versions/1", content=expander(1 << 32))

    assert pushed.status_code == 201, pushed.text
    stored = api.get("/api/v1/models/big/versions/1").json()
    assert "Failed to allocate memory" in str(stored), stored
