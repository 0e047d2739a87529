"""Default shape profiles over the real controller: a dynamic model pushed with
``--shape`` deploys with a TensorRT config that has no profile (the profile is the pushed shape,
min = opt = max, in the resolved config and the desired document, with its provenance); pushed
without a shape it is refused as before; pushed with ``--inputs`` the sample's shape serves."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
from click.testing import Result
from onnx import TensorProto, helper

from controller.server import Controller
from shared.codec import encode
from shared.delegate import ShapeProfile
from shared.topics import Channel, Topics
from tests.integration.controller.conftest import MqttPeer, poll
from tests.integration.controller.test_configs import ok, put, x86_reported
from tests.integration.controller.test_deploy import fresh_desired

GIVEN = "default from the version's warm-up shapes (--shape)"
REFUSAL = "input 'x' has dynamic dimensions ['batch', 4]: add a shape profile"


def dynamic_model() -> bytes:
    """x [batch, 4] → Relu → y [batch, 4]."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data: bytes = model.SerializeToString()
    return data


def test_a_dynamic_model_pushed_with_a_shape_deploys_with_that_shape_as_its_profile(
    run: Callable[..., Result],
    controller: Controller,
    api: httpx.Client,
    peers: Callable[[str], MqttPeer],
    prefix: str,
    tmp_path: Path,
) -> None:
    topics = Topics(prefix)
    peers(controller.broker_url).publish(
        topics.device("gw-1", Channel.REPORTED), encode(x86_reported("gw-1", {}))
    )
    poll(lambda: len(api.get("/api/v1/devices").json()) == 1, what="gw-1 listed")
    model = tmp_path / "dyn.onnx"
    model.write_bytes(dynamic_model())
    sample = tmp_path / "sample.npz"
    np.savez(sample, x=np.ones((2, 5, 4), np.float32))  # two cases of [5, 4]
    for version, extra in (
        ("1", ["--shape", "x=2x4"]),
        ("2", []),
        ("3", ["--inputs", str(sample)]),
    ):
        pushed = run("models", "push", str(model), "--name", "dyn", "--version", version, *extra)
        assert pushed.exit_code == 0, pushed.output
    ok(put(api, "trt", "default", runtime="tensorrt"))

    resolved = ok(
        api.get("/api/v1/configs/trt/resolve", params={"device": "gw-1", "model": "dyn:1"})
    )
    assert resolved["problems"] == []
    assert resolved["delegate"]["shapes"] == [
        {"input": "x", "min": [2, 4], "opt": [2, 4], "max": [2, 4]}
    ]
    assert "default_shapes" not in resolved["delegate"]  # the controller's own marker
    assert resolved["provenance"]["shapes"] == GIVEN
    shown = run("configs", "resolve", "gw-1", "--model", "dyn:1", "--config", "trt")
    assert shown.exit_code == 0, shown.output
    assert GIVEN in shown.output
    assert "problem" not in shown.output

    deployed = api.post(
        "/api/v1/deployments",
        json={"model": "dyn", "version": "1", "device": "gw-1", "config": "trt"},
    )
    assert deployed.status_code == 200, deployed.text
    doc = fresh_desired(peers, controller.broker_url, topics.device("gw-1", Channel.DESIRED), 1)
    delegate = doc.slots[0].delegate
    assert delegate.runtime == "tensorrt"
    assert delegate.shapes == (ShapeProfile(input="x", min=(2, 4), opt=(2, 4), max=(2, 4)),)
    assert delegate.default_shapes == ()  # never sent: older agents refuse unknown fields
    assert "default_shapes" not in ok(api.get("/api/v1/devices/gw-1"))["desired"][0]["delegate"]

    # pushed without a shape: no default, refused with the words it always had
    refused = api.post(
        "/api/v1/deployments",
        json={"model": "dyn", "version": "2", "device": "gw-1", "config": "trt"},
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["detail"] == (
        f"config 'trt' does not fit dyn:2 on device gw-1: gw-1: {REFUSAL}"
    )
    no_shape = ok(
        api.get("/api/v1/configs/trt/resolve", params={"device": "gw-1", "model": "dyn:2"})
    )
    assert no_shape["problems"] == [REFUSAL]
    assert no_shape["delegate"]["shapes"] == []
    assert "default_shapes" not in no_shape["delegate"]

    # pushed with sample inputs: their per-case shape is the default
    sampled = ok(
        api.get("/api/v1/configs/trt/resolve", params={"device": "gw-1", "model": "dyn:3"})
    )
    assert sampled["problems"] == []
    assert sampled["delegate"]["shapes"][0]["opt"] == [5, 4]
    assert sampled["provenance"]["shapes"] == (
        "default from the version's warm-up shapes (reference inputs)"
    )

    # a config with its own profile wins; the ONNX Runtime path needs and gets none
    own = {"input": "x", "min": [1, 4], "opt": [4, 4], "max": [8, 4]}
    ok(put(api, "trt", "device=gw-1", shapes=[own]))
    mine = ok(api.get("/api/v1/devices/gw-1/resolve", params={"model": "dyn"}))
    assert mine["delegate"]["shapes"] == [own]
    assert mine["provenance"]["shapes"] == "device=gw-1"
    ok(put(api, "ort", "default", runtime="onnxruntime"))
    ort = ok(api.get("/api/v1/configs/ort/resolve", params={"device": "gw-1", "model": "dyn:2"}))
    assert (ort["problems"], ort["delegate"]["shapes"]) == ([], [])

    # a deploy with an inline delegate (no named config) gets the same default profile
    inline = api.post(
        "/api/v1/deployments",
        json={
            "model": "dyn",
            "version": "1",
            "device": "gw-1",
            "delegate": {"runtime": "tensorrt"},
        },
    )
    assert inline.status_code == 200, inline.text
    doc = fresh_desired(peers, controller.broker_url, topics.device("gw-1", Channel.DESIRED), 3)
    assert doc.slots[0].delegate.shapes == (
        ShapeProfile(input="x", min=(2, 4), opt=(2, 4), max=(2, 4)),
    )
