"""Named delegate configs over HTTP: layers, resolution, deploys that use them, republishing."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
from onnx import TensorProto, helper

from controller.demo.sample_models import classifier
from controller.server import Controller
from shared.codec import encode
from shared.facts import DeviceFacts, JetsonFacts
from shared.messages import ReportedState
from shared.topics import Channel, Topics
from tests.integration.controller.agent_messages import now
from tests.integration.controller.conftest import MqttPeer, poll, set_labels
from tests.integration.controller.test_deploy import fresh_desired

ORIN = "jetson-orin-nano-8gb/jp6.2"


def jetson_reported(device_id: str, labels: dict[str, str], dla_cores: int) -> ReportedState:
    facts = DeviceFacts(
        hostname=device_id,
        os="Linux",
        arch="aarch64",
        jetson=JetsonFacts(module="Jetson Orin Nano 8GB", jetpack="6.2", dla_cores=dla_cores),
    )
    return ReportedState(
        device_id=device_id,
        observed_generation=-1,
        reported_at=now(),
        labels=labels,
        facts=facts,
        agent_version="test",
    )


def x86_reported(device_id: str, labels: dict[str, str]) -> ReportedState:
    facts = DeviceFacts(hostname=device_id, os="Linux", arch="x86_64")
    return ReportedState(
        device_id=device_id,
        observed_generation=-1,
        reported_at=now(),
        labels=labels,
        facts=facts,
        agent_version="test",
    )


def put(api: httpx.Client, name: str, scope: str, **values: Any) -> httpx.Response:
    return api.put(f"/api/v1/configs/{name}", json={"scope": scope, "values": values})


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def two_devices(controller: Controller, api: httpx.Client, peer: MqttPeer, prefix: str) -> None:
    topics = Topics(prefix)
    peer.publish(
        topics.device("gw-1", Channel.REPORTED),
        encode(jetson_reported("gw-1", {"fleet": "x", "site": "a"}, dla_cores=0)),
    )
    peer.publish(
        topics.device("gw-2", Channel.REPORTED), encode(x86_reported("gw-2", {"fleet": "x"}))
    )
    poll(lambda: len(api.get("/api/v1/devices").json()) == 2, what="two devices")
    set_labels(api, "gw-1", {"fleet": "x", "site": "a"})
    set_labels(api, "gw-2", {"fleet": "x"})
    assert api.put("/api/v1/models/classifier/versions/1", content=classifier()).status_code == 201


def test_layers_resolve_per_device_and_deploys_use_them(
    db_controller: Controller,
    db_api: httpx.Client,
    peers: Callable[[str], MqttPeer],
    prefix: str,
) -> None:
    api = db_api
    two_devices(db_controller, api, peers(db_controller.broker_url), prefix)
    ok(put(api, "edge", "default", precision="fp16"))
    ok(put(api, "edge", f"class={ORIN}", streams=2))
    ok(put(api, "edge", "selector=site=a", onnxruntime={"providers": ["CUDAExecutionProvider"]}))
    ok(put(api, "edge", "device=gw-2", workspace_mib=64))

    shown = ok(api.get("/api/v1/configs/edge"))
    assert [layer["scope"] for layer in shown["layers"]] == [
        "default",
        f"class={ORIN}",
        "selector=site=a",
        "device=gw-2",
    ]
    assert [c["name"] for c in ok(api.get("/api/v1/configs"))] == ["edge"]

    resolved = ok(
        api.get("/api/v1/configs/edge/resolve", params={"device": "gw-1", "model": "classifier"})
    )
    assert resolved["hardware_class"] == ORIN
    assert resolved["version"] == "1"
    assert (resolved["delegate"]["precision"], resolved["delegate"]["streams"]) == ("fp16", 2)
    assert resolved["provenance"]["precision"] == "default"
    assert resolved["provenance"]["streams"] == f"class={ORIN}"
    assert resolved["provenance"]["onnxruntime.providers"] == "selector=site=a"
    assert resolved["problems"] == []

    deployed = ok(
        api.post(
            "/api/v1/deployments",
            json={"model": "classifier", "version": "1", "selector": "fleet=x", "config": "edge"},
        )
    )
    assert [(d["device_id"], d["generation"]) for d in deployed["devices"]] == [
        ("gw-1", 1),
        ("gw-2", 1),
    ]
    doc = fresh_desired(
        peers, db_controller.broker_url, Topics(prefix).device("gw-1", Channel.DESIRED), 1
    )
    assert doc.slots[0].delegate.streams == 2
    assert doc.slots[0].delegate.onnxruntime.providers == ("CUDAExecutionProvider",)
    gw2 = ok(api.get("/api/v1/devices/gw-2"))
    assert gw2["hardware_class"] == "cpu-x86_64"
    assert gw2["desired"][0]["config"] == "edge"
    assert gw2["desired"][0]["delegate"]["workspace_mib"] == 64
    assert gw2["desired"][0]["delegate"]["streams"] == 1

    # a change that only touches gw-2 republishes gw-2 alone
    changed = ok(put(api, "edge", "device=gw-2", workspace_mib=128))
    assert [(d["device_id"], d["generation"], d["changed"]) for d in changed["devices"]] == [
        ("gw-1", 1, False),
        ("gw-2", 2, True),
    ]
    assert ok(api.get("/api/v1/devices/gw-2"))["desired"][0]["delegate"]["workspace_mib"] == 128

    # a change that does not fit a device using the config is refused and not stored
    refused = put(api, "edge", f"class={ORIN}", streams=2, dla_core=0)
    assert refused.status_code == 400
    assert "gw-1" in refused.json()["detail"]
    assert "has no DLA" in refused.json()["detail"]
    assert "dla_core" not in ok(api.get("/api/v1/configs/edge"))["layers"][1]["values"]

    removed = ok(api.delete("/api/v1/configs/edge", params={"scope": "device=gw-2"}))
    assert [(d["device_id"], d["changed"]) for d in removed["devices"]] == [
        ("gw-1", False),
        ("gw-2", True),
    ]
    gw2 = ok(api.get("/api/v1/devices/gw-2"))
    assert gw2["desired_generation"] == 3
    assert gw2["desired"][0]["delegate"]["workspace_mib"] is None


def test_a_deploy_whose_config_does_not_fit_is_refused_naming_the_device(
    controller: Controller, api: httpx.Client, peers: Callable[[str], MqttPeer], prefix: str
) -> None:
    two_devices(controller, api, peers(controller.broker_url), prefix)
    ok(put(api, "dla", "default", precision="fp16", dla_core=0))
    r = api.post(
        "/api/v1/deployments",
        json={"model": "classifier", "version": "1", "selector": "fleet=x", "config": "dla"},
    )
    assert r.status_code == 400
    detail = r.json()["detail"]
    assert detail.startswith("config 'dla' does not fit classifier:1 on device gw-1:")
    assert f"{ORIN} has no DLA" in detail
    assert ok(api.get("/api/v1/devices/gw-2"))["desired"] == []

    unknown = api.post(
        "/api/v1/deployments",
        json={"model": "classifier", "version": "1", "device": "gw-2", "config": "nosuch"},
    )
    assert unknown.status_code == 404
    assert "jetfleet configs set nosuch" in unknown.json()["detail"]


def test_config_values_and_scopes_are_validated(api: httpx.Client) -> None:
    bad_field = put(api, "edge", "default", precison="fp16")
    assert bad_field.status_code == 400
    assert "precison" in bad_field.json()["detail"]
    bad_type = put(api, "edge", "default", streams="many")
    assert bad_type.status_code == 400
    assert "streams" in bad_type.json()["detail"]
    bad_scope = put(api, "edge", "rack=7", streams=2)
    assert bad_scope.status_code == 400
    assert "selector=<k=v,...>" in bad_scope.json()["detail"]
    assert api.get("/api/v1/configs/edge").status_code == 404
    assert api.delete("/api/v1/configs/edge", params={"scope": "default"}).status_code == 404


def qdq_model() -> bytes:
    """A tiny explicitly quantized model: x → QuantizeLinear → DequantizeLinear → Relu."""
    graph = helper.make_graph(
        [
            helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"]),
            helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["dq"]),
            helper.make_node("Relu", ["dq"], ["y"]),
        ],
        "qdq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [
            helper.make_tensor("scale", TensorProto.FLOAT, [], [0.1]),
            helper.make_tensor("zero", TensorProto.UINT8, [], [128]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data: bytes = model.SerializeToString()
    return data


def test_int8_needs_calibration_unless_the_model_has_qdq_nodes(
    controller: Controller, api: httpx.Client, peers: Callable[[str], MqttPeer], prefix: str
) -> None:
    two_devices(controller, api, peers(controller.broker_url), prefix)
    qdq = api.put("/api/v1/models/qdq/versions/1", content=qdq_model())
    assert qdq.status_code == 201, qdq.text
    assert qdq.json()["has_qdq"] is True
    assert ok(api.get("/api/v1/models/classifier/versions/1"))["has_qdq"] is False
    ok(put(api, "int8", "default", precision="int8"))

    def problems(model: str) -> list[str]:
        params = {"device": "gw-2", "model": model}
        return list(ok(api.get("/api/v1/configs/int8/resolve", params=params))["problems"])

    assert problems("qdq:1") == []
    assert problems("classifier") == [INT8_REFUSAL]


INT8_REFUSAL = (
    "precision int8 needs a calibration cache (calibration_cache_sha256), a model with Q/DQ "
    "nodes, or sample inputs to calibrate on the device: push the version again with --inputs "
    "samples.npz (representative inputs; random ones calibrate poorly)"
)


def test_int8_calibrates_on_the_device_from_the_operators_sample_inputs(
    controller: Controller, api: httpx.Client, peers: Callable[[str], MqttPeer], prefix: str
) -> None:
    """A version pushed with sample inputs (``--inputs``) deploys at int8
    without a calibration cache, and its desired slot says the reference's inputs calibrate
    (the device calibrates from them); a version whose reference inputs the controller made up
    is refused, naming ``--inputs``."""
    two_devices(controller, api, peers(controller.broker_url), prefix)
    ok(put(api, "int8", "default", precision="int8"))
    samples = io.BytesIO()
    np.savez(samples, image=np.random.default_rng(5).random((2, 1, 3, 32, 32), np.float32))
    stored = api.post(
        "/api/v1/artifacts",
        content=samples.getvalue(),
        headers={"Content-Type": "application/octet-stream"},
    )
    assert stored.status_code in (200, 201), stored.text
    pushed = api.put(
        "/api/v1/models/classifier/versions/2",
        content=classifier(seed=8),
        params={"inputs_sha256": stored.json()["sha256"]},
    )
    assert pushed.status_code == 201, pushed.text

    def deploy(version: str) -> httpx.Response:
        body = {"model": "classifier", "version": version, "device": "gw-2", "config": "int8"}
        return api.post("/api/v1/deployments", json=body)

    refused = deploy("1")  # reference outputs of random inputs: no calibration from them
    assert refused.status_code == 400
    assert INT8_REFUSAL in refused.json()["detail"]
    assert deploy("2").status_code == 200
    doc = fresh_desired(
        peers, controller.broker_url, Topics(prefix).device("gw-2", Channel.DESIRED), 1
    )
    assert doc.slots[0].reference is not None
    assert doc.slots[0].reference_calibrates is True
