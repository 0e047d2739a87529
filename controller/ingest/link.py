"""A lean MQTT 3.1.1 subscriber for the ingest workers: many messages per read, one PUBACK write.

Why not paho here: paho handles one packet per pass of its network loop: a ``select``, one
``recv`` for the packet type, one per byte of the length, one for the rest, then a PUBACK queued
through its wake-up socket pair and written on its own. At tens of thousands of telemetry
messages a second that loop, not decoding or the database, was most of an ingest worker's CPU
(py-spy, ``bench/ingest.py``). This link reads what the socket holds (up to 256 KiB at a time),
splits every complete packet out of it, answers all the QoS 1 PUBLISHes of that read with one
write, and hands the messages over as one batch.

It speaks only what an ingest worker needs: CONNECT (user name and password, TLS through the
same context as :mod:`controller.mqtt_bus`), one SUBSCRIBE at QoS 1 whose SUBACK ``start`` waits
for, PUBLISH at QoS 0 and 1 in, PUBACK out, PINGREQ while idle, and DISCONNECT on ``stop``. A
lost connection is retried with back-off (1 s doubling to 30 s), and the subscription is made
again. Anything else that ends a session (a bug, ``on_batch`` raising) ends the link's loop; the
loop runs under :class:`shared.supervision.Supervised` (``restart``), which logs it with the
thread's name and starts it again (a new connection) after its own back-off. The controller's own
client (publishing desired documents, receiving state) stays paho.

Delivery: a message is acknowledged only once it is stored.
``on_batch`` gets each read's messages with a ``done`` callable, which the ingest calls once
every message of the read is written (or refused for good, counted); the PUBACKs of that read are
then written by the link's thread, in the order the messages came (MQTT 5.0 4.6); the
bookkeeping of those PUBACKs is :mod:`controller.ingest.link_acks`. With a
persistent session (``session_expiry_s`` > 0, a stable ``client_id``), what the broker had
accepted while this process was down or dead, and what it had sent but not seen acknowledged,
is delivered again when the same client id connects again; (device_id, sample_id) is unique in
the database, so a message delivered twice is stored once. The link speaks MQTT 5.0 for that
(session expiry, and a receive maximum of :data:`RECEIVE_MAXIMUM` so unacknowledged messages are
not capped at the broker's 3.1.1 default of 20 in flight) and falls back to 3.1.1 (a persistent
session without expiry) when the broker refuses 5.0.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Sequence

from controller.errors import BusError
from controller.ingest.link_acks import DRAIN_S, PendingAcks, await_pingresp
from shared.broker_tls import CONTROLLER_FIXES, client_tls_context, explain_connect_error
from shared.mqtt_wire import (
    DISCONNECT,
    PINGREQ,
    Batch,
    ProtocolError,
    connect_packet,
    read_connack,
    read_disconnect,
    read_publishes,
    read_suback,
    split_packets,
    subscribe_packet,
)
from shared.supervision import Supervised
from shared.transport import MqttAuth, parse_broker_url

logger = logging.getLogger(__name__)

READ_BYTES = 256 * 1024
KEEPALIVE_S = 30
MIN_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
RECEIVE_MAXIMUM = 16_384
"""QoS 1 messages the broker may have sent and not seen acknowledged (MQTT 5.0): a read's
acknowledgements wait for its write, so this bounds how far the broker runs ahead of the
database."""
ACK_POLL_S = 0.02
"""How often the link's thread looks for acknowledgements to write while some are outstanding."""
STOP_FLUSH_S = 5.0
"""How long ``stop`` waits for the acknowledgements of messages already handed over."""
PROTOCOL_REFUSED = "unacceptable protocol version"

OnBatch = Callable[[Batch, Callable[[], None]], None]
"""``on_batch(messages, done)``: ``done()`` once every message is stored (from any thread)."""


class IngestLink:
    """``start`` connects and subscribes (BusError when it cannot); ``stop`` disconnects.

    ``on_batch`` runs on the link's thread with the messages of one read and a ``done`` callable;
    their PUBACKs are written once ``done`` was called (from any thread). While ``on_batch`` runs,
    nothing more is read (the broker holds the rest: backpressure).

    ``client_id`` (default: ``client_name`` and a random suffix) must be stable across restarts
    and unique per link for a persistent session (``session_expiry_s`` > 0) to be found again.
    """

    def __init__(
        self,
        broker_url: str,
        subscriptions: Sequence[str],
        on_batch: OnBatch,
        *,
        auth: MqttAuth | None = None,
        client_name: str = "jetfleet-ingest",
        client_id: str | None = None,
        session_expiry_s: int = 0,
        protocol: int = 5,
        keepalive_s: int = KEEPALIVE_S,
    ) -> None:
        self.broker_url = broker_url
        address = parse_broker_url(broker_url)
        self._host, self._port, self._tls = address.host, address.port, address.tls
        self._auth = auth or MqttAuth()
        self._tls_context: ssl.SSLContext | None = None
        if self._tls:
            try:
                self._tls_context = client_tls_context(
                    self._auth.ca_file, self._auth.cert_file, self._auth.key_file
                )
            except (OSError, ValueError) as exc:
                raise BusError(
                    f"cannot set up TLS to the broker ({exc}): check --broker-ca, --broker-cert "
                    "and --broker-key"
                ) from exc
        self._subscriptions = list(subscriptions)
        self._on_batch = on_batch
        self._client_id = client_id or f"{client_name}-{uuid.uuid4().hex[:12]}"
        self._session_expiry = session_expiry_s
        self._version = protocol
        self._keepalive = keepalive_s
        self._acks = PendingAcks()
        self._stopping = threading.Event()
        self._subscribed = threading.Event()
        self._ever_subscribed = False
        self._first_refusal: str | None = None
        """Why the broker refused the first attempt (credentials, TLS): ``start`` fails at once."""
        self._error: str | None = None
        self._refused: str | None = None
        """Why the broker refused the subscription (ACL): not retried."""
        self._send_lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._last_send = 0.0
        self._guard: Supervised | None = None

    @property
    def client_id(self) -> str:
        """The MQTT client id: the broker keeps a persistent session under it."""
        return self._client_id

    @property
    def protocol(self) -> int:
        """The MQTT protocol level in use: 5 (5.0), or 4 (3.1.1) after a broker refused 5.0."""
        return self._version

    @property
    def connected(self) -> bool:
        """Connected and subscribed now."""
        return self._subscribed.is_set()

    @property
    def restarts(self) -> int:
        """How many times the link's loop was started again after a crash (since ``start``)."""
        return self._guard.restarts if self._guard is not None else 0

    def start(self, timeout_s: float = 10.0) -> None:
        """Connect, subscribe, and keep reading on a thread; BusError if not subscribed in time."""
        self._stopping.clear()
        self._guard = Supervised(
            "jetfleet-ingest-link", self._run, policy="restart", stop=self._stopping
        ).start()
        deadline = time.monotonic() + timeout_s
        while not self._subscribed.wait(0.05):
            if self._refused or self._first_refusal or time.monotonic() >= deadline:
                break
        if self._subscribed.is_set():
            return
        error = self._refused or self._first_refusal or self._error or "no answer"
        self.stop()
        if self._refused is not None or self._first_refusal is not None:
            raise BusError(error)
        raise BusError(
            f"no subscription on the MQTT broker at {self.broker_url} within "
            f"{timeout_s:.0f} s: {error}"
        )

    def stop(self) -> None:
        """Ask the link's thread to send DISCONNECT and close (within about a second), join it.

        Only the link's thread touches the socket while it runs (a TLS socket must not be read
        and written from two threads at once); one stuck in ``on_batch`` past 10 s has its
        socket shut under it.
        """
        self._stopping.set()
        if self._guard is not None:
            self._guard.join(10.0)
            sock = self._sock
            if self._guard.is_alive() and sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                self._guard.join(5.0)
            self._guard = None
        self._subscribed.clear()

    # --- the link's thread -------------------------------------------------------------------

    def _run(self) -> None:
        backoff = MIN_BACKOFF_S
        while not self._stopping.is_set() and self._refused is None:
            began = time.monotonic()
            try:
                self._session()
            except (BusError, ProtocolError, OSError) as exc:  # the next session starts over
                if self._stopping.is_set():
                    break
                if isinstance(exc, OSError):
                    error = explain_connect_error(exc, CONTROLLER_FIXES)
                else:
                    error = str(exc)
                if self._version == 5 and PROTOCOL_REFUSED in error:
                    self._version = 4
                    logger.warning(
                        "MQTT broker %s refused MQTT 5.0; telemetry ingest speaks 3.1.1 to it "
                        "(a persistent session without expiry; the broker's max_inflight_messages "
                        "bounds the unacknowledged messages)",
                        self.broker_url,
                    )
                    continue
                if error != self._error:
                    logger.warning("MQTT broker %s: %s; reconnecting", self.broker_url, error)
                self._error = error
                refused = isinstance(exc, (BusError, ssl.SSLError)) and "refused" in error
                if not self._ever_subscribed and (refused or isinstance(exc, ssl.SSLError)):
                    self._first_refusal = error
            finally:
                was = self._subscribed.is_set()
                self._subscribed.clear()
                sock, self._sock = self._sock, None
                if sock is not None:
                    sock.close()
                if was and not self._stopping.is_set():
                    logger.warning("lost MQTT broker %s; reconnecting", self.broker_url)
            if time.monotonic() - began > MAX_BACKOFF_S:
                backoff = MIN_BACKOFF_S  # it ran a while: the next failure is a new one
            if self._stopping.wait(backoff):
                break
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _session(self) -> None:
        sock = socket.create_connection((self._host, self._port), timeout=10.0)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tls_context is not None:
            try:
                sock = self._tls_context.wrap_socket(sock, server_hostname=self._host)
            except BaseException:
                sock.close()
                raise
        self._sock = sock
        if self._stopping.is_set():
            return
        session = self._acks.new_session()
        version = self._version
        self._send(
            sock,
            connect_packet(
                self._client_id,
                self._keepalive,
                self._auth,
                clean=self._session_expiry <= 0,
                version=version,
                session_expiry_s=self._session_expiry,
                receive_maximum=RECEIVE_MAXIMUM if version == 5 else None,
            ),
        )
        buf = bytearray()
        packet_id = 1
        subscribed = False
        ping_due = self._keepalive / 2
        last_recv = time.monotonic()
        flush_until: float | None = None
        while True:
            if self._stopping.is_set() and flush_until is None:
                if not subscribed:
                    break
                flush_until = time.monotonic() + STOP_FLUSH_S  # write what is stored, then leave
            self._write_acks(sock, session)
            if flush_until is not None:
                if self._acks.flushed() or time.monotonic() >= flush_until:
                    if not await_pingresp(sock, buf, version, self._send, READ_BYTES):
                        logger.warning(
                            "MQTT broker %s did not answer PINGREQ within %.0f s at stop: "
                            "acknowledgements written just before may not have reached it (their "
                            "messages come again)",
                            self.broker_url,
                            DRAIN_S,
                        )
                    break
                time.sleep(ACK_POLL_S)  # read nothing more: unacknowledged, it comes again
                continue
            sock.settimeout(ACK_POLL_S if self._acks.waiting() else min(1.0, self._keepalive / 2))
            try:
                data = sock.recv(READ_BYTES)
            except TimeoutError:
                data = None
            if data is None and time.monotonic() - last_recv > 1.5 * self._keepalive:
                raise ConnectionError("the broker stopped answering (keepalive)")
            if data is not None:
                if not data:
                    raise ConnectionError("the broker closed the connection")
                last_recv = time.monotonic()
                buf += data
                packets, used = split_packets(buf)
                del buf[:used]
                messages, acks, other = read_publishes(packets, version)
                for first, body in other:
                    kind = first >> 4
                    if kind == 2:  # CONNACK
                        _present, refusal = read_connack(body, version)
                        if refusal:
                            raise BusError(f"the broker refused the connection: {refusal}")
                        self._send(sock, subscribe_packet(packet_id, self._subscriptions, version))
                    elif kind == 9:  # SUBACK
                        codes = read_suback(body, version)
                        refused = [
                            f
                            for f, code in zip(self._subscriptions, codes, strict=False)
                            if code >= 0x80
                        ]
                        if refused:
                            self._refused = (
                                f"the broker at {self.broker_url} refused the subscription to "
                                f"{refused[0]}: allow it in the controller's broker ACL "
                                "(`jetfleet broker config` writes it)"
                            )
                            logger.error("%s", self._refused)
                            return
                        subscribed = True
                        self._ever_subscribed = True
                        self._error = None
                        self._subscribed.set()
                        logger.info(
                            "ingest link %s subscribed on %s (MQTT %s, %s session)",
                            self._client_id,
                            self.broker_url,
                            "5.0" if version == 5 else "3.1.1",
                            "persistent" if self._session_expiry > 0 else "clean",
                        )
                    elif kind == 14:  # DISCONNECT (5.0: the broker says why)
                        raise ConnectionError(f"the broker disconnected: {read_disconnect(body)}")
                if messages:
                    self._hand_over(messages, acks, session)
            elif not subscribed and time.monotonic() - self._last_send > 10.0:
                raise BusError("the broker did not answer CONNECT/SUBSCRIBE within 10 s")
            if time.monotonic() - self._last_send >= ping_due:
                self._send(sock, PINGREQ)
        with contextlib.suppress(OSError):
            self._send(sock, DISCONNECT)  # stopping: leave cleanly

    def _hand_over(self, messages: Batch, acks: bytes, session: int) -> None:
        """``on_batch`` one read; its PUBACKs are queued for writing when ``done`` is called."""
        if not acks:  # QoS 0 only: nothing to acknowledge
            self._on_batch(messages, _nothing)
            return
        self._on_batch(messages, self._acks.expect(session, acks))

    def _write_acks(self, sock: socket.socket, session: int) -> None:
        ready = self._acks.ready(session)
        if ready:
            self._send(sock, ready)

    def _send(self, sock: socket.socket, data: bytes) -> None:
        with self._send_lock:
            sock.sendall(data)
            self._last_send = time.monotonic()


def _nothing() -> None:
    """``done`` for a read with nothing to acknowledge."""
