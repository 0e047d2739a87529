"""Reference outputs computed at push travel with each desired slot, and are what ORT computes."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import onnxruntime as ort
from click.testing import CliRunner

from controller.cli.main import cli
from controller.demo.sample_models import classifier
from controller.server import Controller
from shared.codec import decode, encode
from shared.messages import DesiredState
from shared.topics import Channel, Topics
from tests.analysis_models import mobilenet_v2_like
from tests.integration.controller.agent_messages import reported
from tests.integration.controller.conftest import MqttPeer, admin_token, poll


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
    npz_bytes = api.get(reference.url).content
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


def test_an_operator_npz_replaces_the_computed_references(
    controller: Controller, api: httpx.Client, tmp_path: Path
) -> None:
    model = classifier()
    api.put("/api/v1/models/classifier/versions/2", content=model)
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    images = np.random.default_rng(5).random((3, 1, 3, 32, 32), dtype=np.float32)
    outputs = np.stack([session.run(None, {"image": x})[0] for x in images])
    npz = tmp_path / "mine.npz"
    np.savez(npz, **{"input:image": images, "output:probabilities": outputs})

    (tmp_path / "m.onnx").write_bytes(model)
    result = CliRunner(env={"JETFLEET_TOKEN": admin_token(controller)}).invoke(
        cli,
        ["models", "push", str(tmp_path / "m.onnx"), "--name", "classifier", "--version", "2",
         "--reference", str(npz), "--url", controller.http_url],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    stored = api.put(
        "/api/v1/models/classifier/versions/2/reference", content=npz.read_bytes()
    ).json()
    assert stored["sha256"] == hashlib.sha256(npz.read_bytes()).hexdigest()

    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, **{"input:img": images})
    refused = api.put("/api/v1/models/classifier/versions/2/reference", content=wrong.read_bytes())
    assert refused.status_code == 422
    assert "input:image" in refused.json()["detail"]
