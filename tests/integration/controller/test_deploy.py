"""Deployments publish retained desired documents a fresh subscriber receives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from controller.demo.sample_models import anomaly, classifier
from controller.server import Controller
from shared.codec import decode, encode
from shared.messages import DesiredState
from shared.topics import Channel, Topics
from tests.integration.controller.agent_messages import reported
from tests.integration.controller.conftest import MqttPeer, poll, set_labels


def latest_desired(peer: MqttPeer, topic: str, generation: int) -> DesiredState:
    def seen() -> DesiredState | None:
        docs = [decode(DesiredState, p) for p in peer.on(topic)]
        return next((d for d in docs if d.generation == generation), None)

    return poll(seen, what=f"desired generation {generation} on {topic}")


def fresh_desired(
    make: Callable[[str], MqttPeer], broker: str, topic: str, generation: int
) -> DesiredState:
    peer = make(broker)
    peer.subscribe(topic)
    return latest_desired(peer, topic, generation)


def deploy(api: httpx.Client, **body: Any) -> dict[str, Any]:
    r = api.post("/api/v1/deployments", json=body)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_deploy_publishes_retained_desired_state(
    db_controller: Controller,
    db_api: httpx.Client,
    peers: Callable[[str], MqttPeer],
    prefix: str,
) -> None:
    topics = Topics(prefix)
    broker = db_controller.broker_url
    agent = peers(broker)
    for dev, site in (("gw-1", "a"), ("gw-2", "a"), ("gw-3", "b")):
        agent.publish(topics.device(dev, Channel.REPORTED), encode(reported(dev, {"site": site})))
    poll(lambda: len(db_api.get("/api/v1/devices").json()) == 3, what="three devices")
    for dev, site in (("gw-1", "a"), ("gw-2", "a"), ("gw-3", "b")):
        set_labels(db_api, dev, {"site": site})
    cls = db_api.put("/api/v1/models/classifier/versions/1", content=classifier()).json()
    db_api.put("/api/v1/models/anomaly/versions/1", content=anomaly())
    topic = topics.device("gw-1", Channel.DESIRED)

    first = deploy(db_api, model="classifier", version="1", device="gw-1")
    assert first["devices"] == [{"device_id": "gw-1", "generation": 1, "changed": True}]
    doc = fresh_desired(peers, broker, topic, 1)
    assert [(s.name, s.version) for s in doc.slots] == [("classifier", "1")]
    assert doc.slots[0].artifact.sha256 == cls["sha256"]
    assert doc.slots[0].artifact.url == cls["download_url"]

    deploy(db_api, model="anomaly", version="1", device="gw-1")
    doc = fresh_desired(peers, broker, topic, 2)
    assert [s.name for s in doc.slots] == ["classifier", "anomaly"]

    same = deploy(db_api, model="anomaly", version="1", device="gw-1")
    assert same["devices"] == [{"device_id": "gw-1", "generation": 2, "changed": False}]

    fanout = deploy(db_api, model="classifier", version="1", selector="site=a")
    assert fanout["devices"] == [
        {"device_id": "gw-1", "generation": 2, "changed": False},
        {"device_id": "gw-2", "generation": 1, "changed": True},
    ]
    shown = db_api.get("/api/v1/devices/gw-2").json()
    assert [s["name"] for s in shown["desired"]] == ["classifier"]

    removed = db_api.post(
        "/api/v1/deployments/remove", json={"model": "classifier", "device": "gw-1"}
    )
    assert removed.json()["devices"][0]["generation"] == 3
    doc = fresh_desired(peers, broker, topic, 3)
    assert [s.name for s in doc.slots] == ["anomaly"]
