"""A real MQTT client that watches one device's reported state and publishes its desired one."""

from __future__ import annotations

import uuid

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from shared.codec import decode_for
from shared.messages import ReportedState
from shared.topics import Channel, Topics


class ReportedWatcher:
    """Collects the reported documents of one device from the real broker."""

    def __init__(self, broker_url: str, topics: Topics, device_id: str) -> None:
        self.topics = topics
        self.reports: list[ReportedState] = []
        host, _, port = broker_url.removeprefix("mqtt://").partition(":")
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"w-{uuid.uuid4().hex}")
        self.client.on_message = self._on_message
        self.client.connect(host, int(port))
        self.client.loop_start()
        self.client.subscribe(topics.device(device_id, Channel.REPORTED), qos=1)

    def _on_message(self, _client: object, _userdata: object, msg: mqtt.MQTTMessage) -> None:
        if msg.payload:
            message = decode_for(Channel.REPORTED, msg.payload)
            assert isinstance(message, ReportedState)
            self.reports.append(message)

    def observed(self) -> int | None:
        return self.reports[-1].observed_generation if self.reports else None

    def publish(self, topic: str, payload: bytes) -> None:
        self.client.publish(topic, payload, qos=1, retain=True).wait_for_publish(10)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
