"""A batch of desired documents goes out at once, not 20 at a time (found at scale).

paho keeps at most ``max_inflight_messages`` QoS 1 publishes unacknowledged (20 by default) and
queues the rest until acknowledgements come back: a rollout chunk of 500 documents paid 25
broker round trips. Between the controller's bus and the real Mosquitto sits a relay that holds
every byte the broker sends back once the first PUBLISH has passed, until the whole batch has
gone through (or a deadline): the number of PUBLISH packets it saw before letting the first
PUBACK through is what the controller had on the wire at once.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid

from controller.mqtt_bus import PUBLISH_WINDOW, MqttBus
from shared.topics import Channel, Topics
from shared.transport import parse_broker_url

BATCH = 500
HOLD_S = 5.0
"""How long the relay holds the broker's answers when fewer publishes come (the old code's case)."""


class HoldingRelay:
    """One connection from the bus to the broker; counts the client's PUBLISH packets and holds
    the broker's bytes from the first PUBLISH on, until ``expect`` of them passed or HOLD_S."""

    def __init__(self, broker: tuple[str, int], expect: int) -> None:
        self._broker = broker
        self._expect = expect
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.publishes = 0
        self.publishes_at_release: int | None = None
        self._first_publish = threading.Event()
        self._release = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = [self._listener]

    def start(self) -> HoldingRelay:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def _accept(self) -> None:
        client, _ = self._listener.accept()
        upstream = socket.create_connection(self._broker, timeout=5)
        self._sockets += [client, upstream]
        for target, args in ((self._upward, (client, upstream)), (self._down, (upstream, client))):
            thread = threading.Thread(target=target, args=args, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _upward(self, client: socket.socket, upstream: socket.socket) -> None:
        """Client → broker, counting PUBLISH packets (MQTT fixed header: type, varint length)."""
        buffer = b""
        while data := _recv(client):
            if not _send(upstream, data):
                return
            buffer += data
            while (packet := _split_packet(buffer)) is not None:
                kind, buffer = packet
                if kind == 3:
                    self.publishes += 1
                    self._first_publish.set()
                    if self.publishes >= self._expect:
                        self._let_go()

    def _down(self, upstream: socket.socket, client: socket.socket) -> None:
        """Broker → client, held from the first PUBLISH until released."""
        while data := _recv(upstream):
            held = self._first_publish.is_set() and not self._release.is_set()
            if held and not self._release.wait(HOLD_S):
                self._let_go()
            if not _send(client, data):
                return

    def _let_go(self) -> None:
        if self.publishes_at_release is None:
            self.publishes_at_release = self.publishes
        self._release.set()

    def close(self) -> None:
        self._release.set()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(5)


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _send(sock: socket.socket, data: bytes) -> bool:
    try:
        sock.sendall(data)
    except OSError:  # closed at the end of the test
        return False
    return True


def _split_packet(buffer: bytes) -> tuple[int, bytes] | None:
    """(packet type, the rest of the buffer) once a whole packet is in ``buffer``."""
    if len(buffer) < 2:
        return None
    length, multiplier, pos = 0, 1, 1
    while True:
        if pos >= len(buffer):
            return None
        byte = buffer[pos]
        length += (byte & 0x7F) * multiplier
        multiplier *= 128
        pos += 1
        if not byte & 0x80:
            break
    end = pos + length
    if len(buffer) < end:
        return None
    return buffer[0] >> 4, buffer[end:]


def test_a_batch_of_documents_is_on_the_wire_before_the_first_acknowledgement(
    mosquitto: str,
) -> None:
    assert PUBLISH_WINDOW >= BATCH
    broker = parse_broker_url(mosquitto)
    relay = HoldingRelay((broker.host, broker.port), BATCH).start()
    topics = Topics(f"jftest/{uuid.uuid4().hex[:10]}")
    bus = MqttBus(f"mqtt://127.0.0.1:{relay.port}", topics, lambda _t, _p: None, subscriptions=[])
    bus.start()
    try:
        messages = [
            (topics.device(f"gw-{i:04d}", Channel.DESIRED), b'{"n": %d}' % i) for i in range(BATCH)
        ]
        started = time.monotonic()
        bus.publish_all(messages, retain=False)
        took = time.monotonic() - started
    finally:
        bus.stop()
        relay.close()
    assert relay.publishes == BATCH
    assert relay.publishes_at_release == BATCH, (
        f"only {relay.publishes_at_release} of {BATCH} publishes left before the broker's first "
        f"acknowledgement came back (the batch took {took:.1f} s)"
    )
