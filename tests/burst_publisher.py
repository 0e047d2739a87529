"""Publish a burst of reported states from a process of its own, as a fleet of gateways would.

``python -m tests.burst_publisher BROKER_URL PREFIX COUNT``: COUNT QoS 1 reports (not retained:
nothing is left on the broker) for devices ``burst-0000``..., every payload encoded before the
first is sent, then all published as fast as the broker acknowledges them. Prints
``published COUNT`` and exits 0 once the broker acknowledged every one; exits 1 otherwise.

A process of its own, not a thread of the test: the controller under test runs in the test's
process, and a publisher there takes the controller's GIL from its MQTT network thread, which is
not what a burst from real gateways does: it throttled the burst to what the controller could
take. From a process of its own, the burst outran the controller's 3.1.1 subscriber and
Mosquitto dropped messages (see :mod:`controller.mqtt_bus`).
"""

from __future__ import annotations

import sys
import uuid

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from shared.codec import encode
from shared.topics import Channel, Topics
from shared.transport import parse_broker_url
from tests.integration.controller.agent_messages import reported


def main(argv: list[str]) -> int:
    broker_url, prefix, count = argv[0], argv[1], int(argv[2])
    topics = Topics(prefix)
    messages = [
        (
            topics.device(f"burst-{i:04d}", Channel.REPORTED),
            encode(reported(f"burst-{i:04d}", {"site": "burst"})),
        )
        for i in range(count)
    ]
    address = parse_broker_url(broker_url)
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=f"jftest-burst-{uuid.uuid4().hex[:8]}",
        protocol=mqtt.MQTTv311,
    )
    client.connect(address.host, address.port, keepalive=30)
    client.loop_start()
    try:
        infos = [client.publish(topic, payload, qos=1) for topic, payload in messages]
        for info in infos:
            info.wait_for_publish(60)
            if info.rc != mqtt.MQTT_ERR_SUCCESS or not info.is_published():
                print(f"publish failed: {mqtt.error_string(info.rc)}", file=sys.stderr)
                return 1
    finally:
        client.disconnect()
        client.loop_stop()
    print(f"published {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
