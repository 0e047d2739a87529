"""The embedded amqtt broker with paho clients: retained messages, Last Wills, and restarts."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from controller.broker_admin.embedded_broker import EmbeddedBroker
from controller.demo.sample_models import classifier
from controller.mqtt_bus import MQTT5, MQTT311, MqttBus
from controller.settings import Settings
from shared.codec import decode, encode
from shared.messages import DesiredState
from shared.topics import Channel, Topics
from tests.integration.controller.agent_messages import reported
from tests.integration.controller.conftest import MqttPeer, api_client, poll, start_controller


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker("127.0.0.1", 0)
    b.start()
    yield b
    b.stop()


def test_free_port_is_reported(broker: EmbeddedBroker) -> None:
    assert broker.port != 0
    assert broker.url == f"mqtt://127.0.0.1:{broker.port}"


def test_retained_message_reaches_a_later_subscriber(
    broker: EmbeddedBroker, peers: Callable[[str], MqttPeer]
) -> None:
    peers(broker.url).publish("jf/x/desired", b"doc-1", retain=True)
    late = peers(broker.url)
    late.subscribe("jf/+/desired")
    assert poll(lambda: late.on("jf/x/desired"), what="retained message") == [b"doc-1"]


def test_a_bus_asking_for_mqtt5_falls_back_to_311_on_a_broker_without_it(
    broker: EmbeddedBroker, peers: Callable[[str], MqttPeer], caplog: pytest.LogCaptureFixture
) -> None:
    """amqtt speaks 3.1.1 only: a receiving bus that asks for 5.0 is refused, says so, connects
    again as 3.1.1 and receives what agents publish."""
    topics = Topics(f"jf{uuid.uuid4().hex[:6]}")
    got: list[bytes] = []
    bus = MqttBus(
        broker.url,
        topics,
        lambda _topic, payload: got.append(payload),
        subscriptions=[topics.every_device(Channel.STATUS)],
        protocol=MQTT5,
    )
    bus.start(timeout_s=10)
    try:
        assert bus.protocol == MQTT311
        assert "refused MQTT 5.0" in caplog.text
        peers(broker.url).publish(topics.device("gw-1", Channel.STATUS), b"online")
        assert poll(lambda: got, what="a message on the 3.1.1 bus") == [b"online"]
    finally:
        bus.stop()


def test_last_will_fires_when_a_client_dies(
    broker: EmbeddedBroker, peers: Callable[[str], MqttPeer]
) -> None:
    watcher = peers(broker.url)
    watcher.subscribe("jf/gw/status")
    dying = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=f"dying-{uuid.uuid4().hex[:6]}",
        protocol=mqtt.MQTTv311,
    )
    dying.will_set("jf/gw/status", b"offline", qos=1, retain=True)
    dying.connect("127.0.0.1", broker.port, keepalive=30)
    dying.loop(timeout=1.0)
    sock = dying.socket()
    assert sock is not None
    sock.close()  # gone without DISCONNECT, like a killed process
    assert set(poll(lambda: watcher.on("jf/gw/status"), what="last will")) == {b"offline"}


def test_controller_republishes_desired_state_after_restart(
    tmp_path: Path, sqlite_url: str, peers: Callable[[str], MqttPeer]
) -> None:
    """The embedded broker forgets retained messages; a restarted controller publishes again."""
    settings = Settings(
        db_url=sqlite_url,
        broker_url=None,
        data_dir=tmp_path / "data",
        http_port=0,
        embedded_broker_port=0,
        auto_migrate=True,
    )
    topics = Topics(settings.topic_prefix)
    topic = topics.device("gw-1", Channel.DESIRED)
    first = start_controller(settings)
    try:
        agent = MqttPeer(first.broker_url).connect()
        try:
            agent.publish(topics.device("gw-1", Channel.REPORTED), encode(reported("gw-1", {})))
        finally:
            agent.close()
        with api_client(first) as api:
            poll(lambda: api.get("/api/v1/devices/gw-1").status_code == 200, what="gw-1")
            api.put("/api/v1/models/classifier/versions/1", content=classifier())
            api.post(
                "/api/v1/deployments",
                json={"model": "classifier", "version": "1", "device": "gw-1"},
            )
    finally:
        first.stop()

    second = start_controller(settings)
    try:
        late = peers(second.broker_url)
        late.subscribe(topic)
        payloads = poll(lambda: late.on(topic), what="republished desired state")
        doc = decode(DesiredState, payloads[-1])
        assert doc.generation == 1
        assert [s.name for s in doc.slots] == ["classifier"]
    finally:
        second.stop()
