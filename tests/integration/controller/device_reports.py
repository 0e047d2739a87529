"""What an agent tells the controller about itself before it may share engines: its facts,
reported over MQTT; and the operator's trust in a class's device builds."""

from __future__ import annotations

from datetime import datetime, timezone

import httpx

from controller.server import Controller
from shared.codec import encode
from shared.facts import DeviceFacts
from shared.messages import ReportedState
from shared.topics import Channel, Topics
from tests.integration.controller.conftest import MqttPeer, poll


def report_facts(
    controller: Controller, api: httpx.Client, device_id: str, facts: DeviceFacts
) -> None:
    """``device_id`` reports ``facts`` on its ``reported`` topic, as an agent does at start;
    returns once the controller stored them."""
    state = ReportedState(
        device_id=device_id,
        observed_generation=-1,
        reported_at=datetime.now(timezone.utc),
        facts=facts,
        agent_version="test",
    )
    peer = MqttPeer(controller.broker_url).connect()
    try:
        topic = Topics(controller.settings.topic_prefix).device(device_id, Channel.REPORTED)
        peer.publish(topic, encode(state))
        poll(
            lambda: api.get(f"/api/v1/devices/{device_id}").json().get("hardware_class"),
            what=f"{device_id}'s facts",
        )
    finally:
        peer.close()


def trust_device_builds(api: httpx.Client, hw_class: str) -> None:
    """Let twins of ``hw_class`` pull its devices' builds as soon as they are stored."""
    response = api.put("/api/v1/engine-trust", json={"hardware_class": hw_class, "mode": "devices"})
    assert response.status_code == 200, response.text
