"""Reference outputs computed at push travel with each desired slot, and are what ORT computes."""

from __future__ import annotations

import io
from collections.abc import Callable

import httpx
import numpy as np
import onnxruntime as ort

from controller.sample_models import classifier
from controller.server import Controller
from shared.codec import decode, encode
from shared.messages import DesiredState
from shared.topics import Channel, Topics
from tests.analysis_models import mobilenet_v2_like
from tests.integration.controller.agent_messages import reported
from tests.integration.controller.conftest import MqttPeer, poll


def test_desired_slot_carries_reference_outputs_that_match_onnx_runtime(
    controller: Controller, api: httpx.Client, peers: Callable[[str], MqttPeer], prefix: str
) -> None:
    topics = Topics(prefix)
    peer = peers(controller.broker_url)
    peer.publish(topics.device("gw-r", Channel.REPORTED), encode(reported("gw-r", {})))
    poll(lambda: api.get("/api/v1/devices/gw-r").status_code == 200, what="gw-r enrolled")
    model = classifier()
    assert api.put("/api/v1/models/classifier/versions/1", content=model).status_code == 201
    deployed = api.post(
        "/api/v1/deployments", json={"model": "classifier", "version": "1", "device": "gw-r"}
    )
    assert deployed.status_code == 200, deployed.text

    topic = topics.device("gw-r", Channel.DESIRED)
    peer.subscribe(topic)
    doc = poll(
        lambda: next((decode(DesiredState, p) for p in peer.on(topic)), None), what="desired"
    )
    reference = doc.slots[0].reference
    assert reference is not None
    npz_bytes = httpx.get(reference.url).content
    assert len(npz_bytes) == reference.size
    with np.load(io.BytesIO(npz_bytes)) as npz:
        inputs, outputs = npz["input:image"], npz["output:probabilities"]
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for case in range(inputs.shape[0]):
        got = session.run(None, {"image": inputs[case]})[0]
        np.testing.assert_allclose(got, outputs[case], rtol=1e-5, atol=1e-6)


def test_a_model_onnx_runtime_cannot_run_is_still_stored_without_references(
    api: httpx.Client,
) -> None:
    custom = mobilenet_v2_like(size=64, classes=4, custom_after_block=1)
    response = api.put("/api/v1/models/custom/versions/1", content=custom)
    assert response.status_code == 201, response.text
