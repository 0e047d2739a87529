"""Dynamic batching is an operator's config knob that reaches the slot's serving settings."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from controller.demo.sample_models import classifier
from controller.server import Controller
from shared.codec import decode, encode
from shared.messages import DesiredState
from shared.topics import Channel, Topics
from tests.integration.controller.agent_messages import reported
from tests.integration.controller.conftest import MqttPeer, poll, set_labels


def test_config_batching_reaches_the_desired_slot(
    controller: Controller, api: httpx.Client, peers: Callable[[str], MqttPeer], prefix: str
) -> None:
    topics = Topics(prefix)
    peer = peers(controller.broker_url)
    peer.publish(topics.device("gw-b", Channel.REPORTED), encode(reported("gw-b", {"site": "a"})))
    poll(lambda: api.get("/api/v1/devices/gw-b").status_code == 200, what="gw-b enrolled")
    set_labels(api, "gw-b", {"site": "a"})
    api.put("/api/v1/models/classifier/versions/1", content=classifier())
    layer = {"scope": "selector=site=a", "values": {"max_batch_size": 8, "max_queue_delay_ms": 2}}
    assert api.put("/api/v1/configs/video", json=layer).status_code == 200
    deploy = {"model": "classifier", "version": "1", "device": "gw-b", "config": "video"}
    assert api.post("/api/v1/deployments", json=deploy).status_code == 200

    topic = topics.device("gw-b", Channel.DESIRED)
    peer.subscribe(topic)
    doc = poll(
        lambda: next((decode(DesiredState, p) for p in peer.on(topic)), None), what="desired"
    )
    serving = doc.slots[0].serving
    assert (serving.max_batch_size, serving.max_queue_delay_ms) == (8, 2)
    bad = {"scope": "default", "values": {"max_batch_size": 0}}
    refused = api.put("/api/v1/configs/video", json=bad)
    assert refused.status_code == 400
    assert "max_batch_size" in refused.text
