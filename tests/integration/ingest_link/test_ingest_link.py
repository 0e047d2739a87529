"""The lean ingest link against real Mosquitto brokers: the shared one, one the test stops and
starts, one with the generated dynamic security ACL, and one serving TLS. No mocks."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from controller.broker_admin.acl import ingest_share_filter
from controller.errors import BusError
from controller.ingest.link import IngestLink
from shared.topics import Channel, Topics
from shared.transport import MqttAuth, parse_broker_url
from tests.integration.controller.conftest import poll
from tests.integration.security_broker.acl_broker import AclMosquitto
from tests.integration.spool.mqtt_peers import MosquittoBroker
from tests.integration.tls.tls_broker import TlsBroker
from tests.ports import free_port
from tests.tls_ca import TlsFiles, make_ca

LINK_THREAD = "jetfleet-ingest-link"
START_TIMEOUT_S = 5.0
"""For links that cannot subscribe: long enough for a first attempt on a busy machine, short
enough that a test waiting out start()'s timeout does not take start()'s default 10 s."""


class Received:
    """The ``on_batch`` of a link: every batch, in arrival order, each stored at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.batches: list[list[tuple[str, bytes]]] = []

    def __call__(self, batch: list[tuple[str, bytes]], done: Callable[[], None]) -> None:
        with self._lock:
            self.batches.append(list(batch))
        done()

    def messages(self) -> list[tuple[str, bytes]]:
        with self._lock:
            return [m for batch in self.batches for m in batch]

    def payloads(self) -> list[bytes]:
        return [payload for _, payload in self.messages()]

    def count(self) -> int:
        with self._lock:
            return sum(len(batch) for batch in self.batches)


def link_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == LINK_THREAD and t.is_alive()]


@pytest.fixture
def no_leftover_link_thread() -> Iterator[None]:
    """After the test, no link thread it started is still running."""
    before = set(link_threads())
    yield
    left = [t for t in link_threads() if t not in before]
    assert not left, f"link threads still alive after the test: {left}"


class Publisher:
    """A paho client publishing at QoS 1 and waiting for every PUBACK."""

    def __init__(self, broker_url: str, ca_file: Path | None = None) -> None:
        address = parse_broker_url(broker_url)
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=f"jftest-pub-{uuid.uuid4().hex[:8]}",
            protocol=mqtt.MQTTv311,
        )
        if address.tls:
            self.client.tls_set(ca_certs=str(ca_file))
        connected = threading.Event()
        self.client.on_connect = lambda *_args: connected.set()
        self.client.connect(address.host, address.port, keepalive=30)
        self.client.loop_start()
        if not connected.wait(10):
            self.close()
            pytest.fail(f"the publisher could not connect to {broker_url}")

    def publish(self, topic: str, payloads: list[bytes]) -> None:
        infos = [self.client.publish(topic, payload, qos=1) for payload in payloads]
        for info in infos:
            info.wait_for_publish(30)
            assert info.is_published(), "the broker did not acknowledge a publish"

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def prefix() -> str:
    return f"jflink/{uuid.uuid4().hex[:10]}"


def numbered(n: int, start: int = 0) -> list[bytes]:
    return [f'{{"seq":{i}}}'.encode() for i in range(start, start + n)]


# --- the shared broker -----------------------------------------------------------------------


def test_every_qos1_message_arrives_once_in_order_in_batches(
    mosquitto: str, prefix: str, no_leftover_link_thread: None
) -> None:
    """2,000 QoS 1 messages: more than the broker's 20 in flight, so this needs the PUBACKs."""
    received = Received()
    link = IngestLink(mosquitto, [f"{prefix}/+/telemetry"], received, client_name="jftest-link")
    link.start()
    publisher = Publisher(mosquitto)
    try:
        assert link.connected
        expected = numbered(2000)
        publisher.publish(f"{prefix}/dev-1/telemetry", expected)
        poll(lambda: received.count() >= len(expected), 20.0, "2,000 messages through the link")
    finally:
        publisher.close()
        link.stop()

    assert received.payloads() == expected, "every message once, in order"
    assert {topic for topic, _ in received.messages()} == {f"{prefix}/dev-1/telemetry"}
    assert len(received.batches) < len(expected), "reads of several messages come as one batch"
    assert not link.connected


def test_only_the_subscribed_filter_arrives(
    mosquitto: str, prefix: str, no_leftover_link_thread: None
) -> None:
    received = Received()
    link = IngestLink(mosquitto, [f"{prefix}/+/telemetry"], received)
    link.start()
    publisher = Publisher(mosquitto)
    try:
        publisher.publish(f"{prefix}/dev-2/status", [b"not for the link"])
        publisher.publish(f"{prefix}/dev-2/telemetry", [b"first"])
        publisher.publish(f"{prefix}/dev-3/telemetry", [b"second"])
        poll(lambda: received.count() >= 2, 20.0, "two telemetry messages")
    finally:
        publisher.close()
        link.stop()

    assert received.messages() == [
        (f"{prefix}/dev-2/telemetry", b"first"),
        (f"{prefix}/dev-3/telemetry", b"second"),
    ]


def test_stop_ends_the_link_thread(mosquitto: str, prefix: str) -> None:
    before = set(link_threads())
    link = IngestLink(mosquitto, [f"{prefix}/+/telemetry"], Received())
    link.start()
    started = [t for t in link_threads() if t not in before]
    assert len(started) == 1, "start runs one link thread"

    link.stop()

    assert not started[0].is_alive()
    assert not link.connected
    assert [t for t in link_threads() if t not in before] == []


def test_stop_while_reconnecting_ends_the_link_thread(tmp_path: Path, prefix: str) -> None:
    """Stopped during its back-off after the broker went away, the link does not linger."""
    directory = tmp_path / "broker"
    directory.mkdir()
    broker = MosquittoBroker(directory, free_port())
    broker.start()
    before = set(link_threads())
    link = IngestLink(f"mqtt://127.0.0.1:{broker.port}", [f"{prefix}/+/telemetry"], Received())
    try:
        link.start()
        broker.stop()
        poll(lambda: not link.connected, 20.0, "the link to notice the broker is gone")
    finally:
        link.stop()
        broker.stop()

    assert [t for t in link_threads() if t not in before] == []


# --- a broker that goes away -----------------------------------------------------------------


def test_the_link_resubscribes_after_the_broker_restarts(
    private_broker: MosquittoBroker, prefix: str, no_leftover_link_thread: None
) -> None:
    url = f"mqtt://127.0.0.1:{private_broker.port}"
    topic = f"{prefix}/dev-1/telemetry"
    received = Received()
    link = IngestLink(url, [f"{prefix}/+/telemetry"], received)
    link.start()
    try:
        publisher = Publisher(url)
        try:
            publisher.publish(topic, numbered(50))
        finally:
            publisher.close()
        poll(lambda: received.count() >= 50, 20.0, "50 messages before the restart")

        private_broker.stop()
        poll(lambda: not link.connected, 20.0, "the link to notice the broker is gone")
        private_broker.start()
        poll(lambda: link.connected, 20.0, "the link to subscribe again by itself")

        publisher = Publisher(url)
        try:
            publisher.publish(topic, numbered(50, start=50))
        finally:
            publisher.close()
        poll(lambda: received.count() >= 100, 20.0, "50 messages after the restart")
    finally:
        link.stop()

    assert received.payloads() == numbered(100)


# --- refusals through the generated ACL ------------------------------------------------------


@pytest.fixture
def acl_broker(mosquitto: str, tmp_path: Path, prefix: str) -> Iterator[AclMosquitto]:
    broker = AclMosquitto(tmp_path / "mosquitto", prefix).start()
    try:
        yield broker
    finally:
        broker.stop()


def test_the_controller_credentials_subscribe_through_the_acl(
    acl_broker: AclMosquitto, prefix: str, no_leftover_link_thread: None
) -> None:
    """The control for the refusals below: the same broker grants what the ACL allows."""
    auth = MqttAuth(acl_broker.controller_user, acl_broker.controller_password)
    topics = Topics(prefix)
    for filters in (
        [topics.every_device(Channel.TELEMETRY)],
        [ingest_share_filter(prefix)],
    ):
        link = IngestLink(acl_broker.url, filters, Received(), auth=auth)
        link.start()
        try:
            assert link.connected, filters
        finally:
            link.stop()


def test_a_wrong_password_is_refused(
    acl_broker: AclMosquitto, prefix: str, no_leftover_link_thread: None
) -> None:
    auth = MqttAuth(acl_broker.controller_user, "not-the-password")
    link = IngestLink(
        acl_broker.url, [Topics(prefix).every_device(Channel.TELEMETRY)], Received(), auth=auth
    )

    with pytest.raises(BusError) as raised:
        link.start(timeout_s=START_TIMEOUT_S)

    message = str(raised.value)
    assert "refused" in message
    assert "bad user name or password" in message or "not authorised" in message
    assert not link.connected


def test_start_gives_up_after_one_refused_login(
    acl_broker: AclMosquitto, prefix: str, no_leftover_link_thread: None
) -> None:
    """Quickly, measured without a clock: the broker saw one login, not one per back-off."""
    auth = MqttAuth(acl_broker.controller_user, "not-the-password")
    link = IngestLink(
        acl_broker.url, [Topics(prefix).every_device(Channel.TELEMETRY)], Received(), auth=auth
    )

    with pytest.raises(BusError, match=r"bad user name or password|not authorised"):
        link.start(timeout_s=START_TIMEOUT_S)
    acl_broker.stop()  # its log is complete once it has exited

    refusals = acl_broker.log_path.read_text().count("disconnected, not authorised")
    assert refusals == 1, f"the broker refused {refusals} logins before start() raised"


def test_an_unknown_user_is_refused(
    acl_broker: AclMosquitto, prefix: str, no_leftover_link_thread: None
) -> None:
    auth = MqttAuth(f"nobody-{uuid.uuid4().hex[:6]}", "whatever")
    link = IngestLink(
        acl_broker.url, [Topics(prefix).every_device(Channel.TELEMETRY)], Received(), auth=auth
    )

    with pytest.raises(BusError, match=r"bad user name or password|not authorised"):
        link.start(timeout_s=START_TIMEOUT_S)


@pytest.mark.parametrize("channel", [Channel.DESIRED, None])
def test_a_subscription_the_acl_does_not_allow_is_refused(
    acl_broker: AclMosquitto, prefix: str, channel: Channel | None, no_leftover_link_thread: None
) -> None:
    topics = Topics(prefix)
    allowed = topics.every_device(Channel.TELEMETRY)
    forbidden = topics.every_device(channel) if channel is not None else f"{prefix}/#"
    auth = MqttAuth(acl_broker.controller_user, acl_broker.controller_password)
    link = IngestLink(acl_broker.url, [allowed, forbidden], Received(), auth=auth)

    with pytest.raises(BusError) as raised:
        link.start()

    message = str(raised.value)
    assert forbidden in message
    assert allowed not in message.replace(forbidden, ""), "only the refused filter is named"
    assert "jetfleet broker config" in message
    assert not link.connected


# --- TLS -------------------------------------------------------------------------------------


def test_an_mqtts_link_subscribes_and_receives(
    tls: TlsFiles, tls_broker: TlsBroker, prefix: str, no_leftover_link_thread: None
) -> None:
    assert tls_broker.url.startswith("mqtts://")
    received = Received()
    link = IngestLink(
        tls_broker.url, [f"{prefix}/+/telemetry"], received, auth=MqttAuth(ca_file=tls.ca_cert)
    )
    link.start()
    try:
        assert link.connected
        publisher = Publisher(tls_broker.url, ca_file=tls.ca_cert)
        try:
            publisher.publish(f"{prefix}/dev-1/telemetry", numbered(100))
        finally:
            publisher.close()
        poll(lambda: received.count() >= 100, 20.0, "100 messages over TLS")
    finally:
        link.stop()

    assert received.payloads() == numbered(100)


def test_an_mqtts_link_with_the_wrong_ca_is_refused(
    tls_broker: TlsBroker, tmp_path: Path, prefix: str, no_leftover_link_thread: None
) -> None:
    other = make_ca(tmp_path / "other-pki")
    link = IngestLink(
        tls_broker.url, [f"{prefix}/+/telemetry"], Received(), auth=MqttAuth(ca_file=other.ca_cert)
    )

    with pytest.raises(BusError, match="certificate") as raised:
        link.start(timeout_s=START_TIMEOUT_S)

    assert "--broker-ca" in str(raised.value), "the error says which option to fix"
    assert not link.connected


def test_an_unreadable_ca_file_is_a_bus_error(tmp_path: Path, prefix: str) -> None:
    with pytest.raises(BusError, match="--broker-ca"):
        IngestLink(
            "mqtts://127.0.0.1:8883",
            [f"{prefix}/+/telemetry"],
            Received(),
            auth=MqttAuth(ca_file=tmp_path / "missing-ca.pem"),
        )
