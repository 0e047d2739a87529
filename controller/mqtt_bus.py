"""The controller's MQTT client (paho); the other paho user is ``broker_admin/dynsec.py``, the
Mosquitto dynamic-security control client.

One paho client (v2 callback API) with its own network thread. On every (re)connect it
subscribes to ``subscriptions`` (by default everything agents publish) and to what it was told
to ``follow`` since, and calls ``on_connected``; inbound messages go to ``on_message`` as
(topic, payload). ``start`` returns once the broker granted the subscriptions; ``publish`` waits
for the broker's PUBACK.

Two protocols, one per role (the controller runs one bus of each, :mod:`controller.server`):

- MQTT 3.1.1 for publishing desired documents: Mosquitto acknowledges a 3.1.1 client's QoS 1
  publishes as they come, so :data:`PUBLISH_WINDOW` of them can be on the wire at once.
- MQTT 5.0 for receiving what agents publish, with a receive maximum of
  :data:`RECEIVE_MAXIMUM`. A 3.1.1 subscriber gets at most the broker's ``max_inflight_messages``
  (20 by default) unacknowledged; the rest wait in the broker's queue for it, and past
  ``max_queued_messages`` (1,000 by default) the broker drops them without a word. A burst of
  gateways reporting at once outran the network thread that way (2,226 of 2,500 reports arrived,
  Mosquitto logged "Outgoing messages are being dropped"). Messages in flight are not queued: with
  MQTT 5.0 the broker sends up to RECEIVE_MAXIMUM of them and the socket carries the backlog.
  A broker that refuses 5.0 gets 3.1.1 (:meth:`MqttBus.start`, logged).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from controller.errors import BusError
from controller.settings import parse_broker_url
from shared import broker_tls
from shared.broker_tls import CONTROLLER_FIXES, explain_connect_error
from shared.topics import AGENT_PUBLISHES, Topics
from shared.transport import MqttAuth

logger = logging.getLogger(__name__)

PUBLISH_WINDOW = 1000
"""QoS 1 publishes on the wire at once, unacknowledged. paho's default is 20: a rollout chunk
or a republish of 500 desired documents then went out 20 at a time, one broker round trip per
20 (25 per chunk), and under load each round trip waits for the broker and for this process's
network thread to get the GIL back. Twice the 500-document chunks, so a republish and a wave's
chunk can be in flight together. Mosquitto acknowledges a client's QoS 1 publishes as they come
(MQTT 3.1.1 has no receive maximum), so the window costs the broker nothing."""


RECEIVE_MAXIMUM = 65_535
"""QoS 1 messages the broker may have sent to a 5.0 bus and not seen acknowledged (the most MQTT
5.0 allows). The bus acknowledges a message once ``on_message`` returned (an inbox put), so this
bounds only how much a burst may sit in the socket instead of the broker's droppable queue."""

MQTT5 = 5
MQTT311 = 4
UNSUPPORTED_PROTOCOL = "Unsupported protocol version"
"""paho's name for the CONNACK refusal a broker without MQTT 5.0 answers a 5.0 CONNECT with."""


class MqttBus:
    """A reconnecting paho client bound to one broker and one topic prefix."""

    def __init__(
        self,
        broker_url: str,
        topics: Topics,
        on_message: Callable[[str, bytes], None],
        on_connected: Callable[[], None] | None = None,
        publish_timeout_s: float = 10.0,
        auth: MqttAuth | None = None,
        subscriptions: Sequence[str] | None = None,
        client_name: str = "jetfleet-controller",
        protocol: int = MQTT311,
    ) -> None:
        self.broker_url = broker_url
        self._host, self._port = parse_broker_url(broker_url)
        self._subscriptions = (
            list(subscriptions)
            if subscriptions is not None
            else [topics.every_device(ch) for ch in AGENT_PUBLISHES]
        )
        self._followed: list[str] = []
        """Filters subscribed to on top of ``subscriptions`` (:meth:`follow`), kept over
        reconnects."""
        self._follow_lock = threading.Lock()
        self._subscribe_mid: int | None = None
        self._suback = threading.Event()
        """Set once the broker answered the first SUBSCRIBE (granted or refused)."""
        self._subscribe_error: str | None = None
        self._on_message = on_message
        self._on_connected = on_connected
        self._timeout = publish_timeout_s
        self._connected = threading.Event()
        self._connect_error: str | None = None
        self._paho_error: str | None = None
        self._connack_seen = False
        self._refused_protocol = threading.Event()
        """Set when the broker refused MQTT 5.0 (start falls back to 3.1.1)."""
        self._client_name = client_name
        self._auth = auth or MqttAuth()
        self.protocol = protocol
        self._client = self._new_client()

    def _new_client(self) -> mqtt.Client:
        client_id = f"{self._client_name}-{uuid.uuid4().hex[:12]}"
        if self.protocol == MQTT5:
            # A 5.0 broker states how many unacknowledged publishes it takes (Mosquitto: its
            # max_inflight_messages, 20 by default) and paho cannot change the window once
            # connected: a 5.0 bus keeps paho's 20 and is for receiving.
            client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id, protocol=mqtt.MQTTv5)
        else:
            client = mqtt.Client(
                CallbackAPIVersion.VERSION2, client_id, protocol=mqtt.MQTTv311, clean_session=True
            )
            client.max_inflight_messages_set(PUBLISH_WINDOW)
        apply_auth(client, self._auth, tls=self.broker_url.startswith("mqtts://"))
        client.reconnect_delay_set(min_delay=1, max_delay=30)
        client.on_connect = self._handle_connect
        client.on_connect_fail = self._handle_connect_fail
        client.on_log = self._handle_paho_log
        client.on_disconnect = self._handle_disconnect
        client.on_message = self._handle_message
        client.on_subscribe = self._handle_subscribe
        return client

    def _connect_async(self) -> None:
        if self.protocol == MQTT5:
            properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            properties.ReceiveMaximum = RECEIVE_MAXIMUM
            # clean start and no session expiry: the 5.0 form of 3.1.1's clean session
            self._client.connect_async(
                self._host, self._port, keepalive=30, clean_start=True, properties=properties
            )
        else:
            self._client.connect_async(self._host, self._port, keepalive=30)

    def start(self, timeout_s: float = 10.0) -> None:
        """Connect and start the network thread; :class:`BusError` if not connected in time.

        A 5.0 bus whose broker refuses 5.0 starts again as 3.1.1 (logged)."""
        try:
            self._start(timeout_s)
        except BusError:
            if self.protocol != MQTT5 or not self._refused_protocol.is_set():
                raise
            logger.warning(
                "MQTT broker %s refused MQTT 5.0 (%s); the controller receives over 3.1.1 (a "
                "burst beyond the broker's max_queued_messages is dropped by the broker: raise it)",
                self.broker_url,
                self._connect_error,
            )
            self.protocol = MQTT311
            self._connect_error = None
            self._refused_protocol.clear()
            self._client = self._new_client()
            self._start(timeout_s)

    def _start(self, timeout_s: float) -> None:
        try:
            self._connect_async()
        except (OSError, ValueError) as exc:
            raise BusError(f"cannot reach the MQTT broker at {self.broker_url}: {exc}") from exc
        self._client.loop_start()
        deadline = time.monotonic() + timeout_s
        while not self._connected.wait(0.05) and not self._refused_protocol.is_set():
            if time.monotonic() > deadline:
                break
        if self._connected.is_set():
            self._suback.wait(max(0.0, deadline - time.monotonic()))
            if self._subscribe_error is not None:
                self.stop()
                raise BusError(self._subscribe_error)
            if self._suback.is_set():
                return
        self.stop()
        if self._connect_error is not None:
            raise BusError(
                f"no connection to the MQTT broker at {self.broker_url} within "
                f"{timeout_s:.0f} s: {self._connect_error}"
            )
        raise BusError(
            f"no connection to the MQTT broker at {self.broker_url} within {timeout_s:.0f} s: "
            "start the broker, or leave out --broker to use the embedded one"
        )

    def stop(self) -> None:
        """Disconnect cleanly and stop the network thread."""
        self._client.disconnect()
        self._client.loop_stop()
        self._connected.clear()

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def follow(self, filters: Sequence[str]) -> None:
        """Subscribe to ``filters`` too (now if connected, and after every reconnect): the
        broker delivers their retained messages at once, then every new one."""
        with self._follow_lock:
            new = [f for f in filters if f not in self._followed]
            self._followed += new
            if new and self._connected.is_set():
                self._client.subscribe([(f, 1) for f in new])

    def unfollow(self, filters: Sequence[str]) -> None:
        """Undo :meth:`follow` for ``filters``."""
        with self._follow_lock:
            gone = [f for f in filters if f in self._followed]
            self._followed = [f for f in self._followed if f not in gone]
            if gone and self._connected.is_set():
                self._client.unsubscribe(gone)

    @property
    def followed(self) -> list[str]:
        """What :meth:`follow` added (and :meth:`unfollow` did not take back)."""
        with self._follow_lock:
            return list(self._followed)

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = True) -> None:
        """Publish and wait for the broker's acknowledgement (PUBACK for QoS 1)."""
        self.publish_all([(topic, payload)], qos=qos, retain=retain)

    def publish_all(
        self, messages: Sequence[tuple[str, bytes]], *, qos: int = 1, retain: bool = True
    ) -> None:
        """Publish every message, then wait for all acknowledgements.

        Waiting once for the lot, rather than for each in turn, keeps a wave of hundreds of
        desired documents from paying one broker round trip (and one GIL hand-over to the
        network thread) per device. Each acknowledgement gets the full timeout from the
        moment the previous one arrived, so a slow but progressing broker is not an error.
        """
        self.send_all(messages, qos=qos, retain=retain)()

    def send_all(
        self, messages: Sequence[tuple[str, bytes]], *, qos: int = 1, retain: bool = True
    ) -> Callable[[], None]:
        """Hand every message to the network thread; the returned call waits for their
        acknowledgements (:class:`BusError` as :meth:`publish_all`). A rollout prepares its
        next chunk of devices while the broker acknowledges this one."""
        sent = [(t, self._client.publish(t, p, qos=qos, retain=retain)) for t, p in messages]

        def wait() -> None:
            for topic, info in sent:
                try:
                    info.wait_for_publish(self._timeout)
                except (RuntimeError, ValueError) as exc:
                    raise BusError(
                        f"publish to {topic} failed: {exc}; is the broker at {self.broker_url} up?"
                    ) from exc
                if not info.is_published():
                    raise BusError(
                        f"the broker at {self.broker_url} did not acknowledge {topic} within "
                        f"{self._timeout:.0f} s"
                    )

        return wait

    def _handle_connect(
        self,
        client: mqtt.Client,
        _userdata: Any,
        _flags: mqtt.ConnectFlags,
        reason_code: ReasonCode,
        _properties: Properties | None,
    ) -> None:
        self._connack_seen = True
        self._paho_error = None
        if reason_code.is_failure:
            self._connect_error = f"the broker refused the connection: {reason_code}"
            logger.warning(
                "MQTT broker %s refused the connection: %s", self.broker_url, reason_code
            )
            if self.protocol == MQTT5 and str(reason_code) == UNSUPPORTED_PROTOCOL:
                client.disconnect()  # start() falls back to 3.1.1; no reconnect loop meanwhile
                self._refused_protocol.set()
            return
        if self._subscriptions:
            _result, self._subscribe_mid = client.subscribe([(f, 1) for f in self._subscriptions])
        else:
            self._suback.set()
        self._connect_error = None
        self._connected.set()
        with self._follow_lock:  # after connected is set, so a concurrent follow() is not missed
            if self._followed:
                client.subscribe([(f, 1) for f in self._followed])
        logger.info("connected to MQTT broker %s", self.broker_url)
        if self._on_connected is not None:
            self._on_connected()

    def _handle_subscribe(
        self,
        _client: mqtt.Client,
        _userdata: Any,
        mid: int,
        reason_codes: list[ReasonCode],
        _properties: Properties | None,
    ) -> None:
        if mid != self._subscribe_mid:
            return
        granted = zip(self._subscriptions, reason_codes, strict=False)
        refused = [f for f, code in granted if code.is_failure]
        if refused:
            self._subscribe_error = (
                f"the broker at {self.broker_url} refused the subscription to {refused[0]}: "
                "allow it in the controller's broker ACL (`jetfleet broker config` writes it)"
            )
            logger.error("%s", self._subscribe_error)
        else:
            self._subscribe_error = None
        self._suback.set()

    def _handle_connect_fail(self, _client: mqtt.Client, _userdata: Any) -> None:
        """paho calls this inside its ``except OSError``: the exception is the current one."""
        self._note_connect_error(explain_connect_error(sys.exc_info()[1], CONTROLLER_FIXES))

    def _handle_paho_log(self, _client: mqtt.Client, _userdata: Any, level: int, buf: str) -> None:
        if level == mqtt.MQTT_LOG_ERR:
            self._paho_error = buf

    def _note_connect_error(self, error: str) -> None:
        """Log why connecting failed, once per distinct reason while the failures last."""
        if error != self._connect_error:
            logger.warning("cannot connect to MQTT broker %s: %s", self.broker_url, error)
        self._connect_error = error

    def _handle_disconnect(
        self,
        _client: mqtt.Client,
        _userdata: Any,
        _flags: mqtt.DisconnectFlags,
        reason_code: ReasonCode,
        _properties: Properties | None,
    ) -> None:
        was_connected = self._connected.is_set()
        self._connected.clear()
        if self.protocol == MQTT5 and not was_connected and not self._connack_seen:
            # amqtt (3.1.1 only) closes the connection on a 5.0 CONNECT instead of refusing it
            self._connect_error = "the broker closed the connection on an MQTT 5.0 CONNECT"
            self._refused_protocol.set()
            self._client.disconnect()
            return
        if not was_connected and self._paho_error is not None:
            self._note_connect_error(explain_connect_error(self._paho_error, CONTROLLER_FIXES))
            self._paho_error = None
        if was_connected and reason_code.is_failure:
            logger.warning("lost MQTT broker %s (%s); reconnecting", self.broker_url, reason_code)

    def _handle_message(self, _client: mqtt.Client, _userdata: Any, msg: mqtt.MQTTMessage) -> None:
        try:
            self._on_message(msg.topic, bytes(msg.payload))
        except Exception:
            logger.exception("handling %s failed; the message was dropped", msg.topic)


def apply_auth(client: mqtt.Client, auth: MqttAuth, *, tls: bool) -> None:
    """Set ``auth``'s user name/password and, for ``mqtts://``, TLS on a paho client
    (:func:`shared.broker_tls.apply_auth`, with the controller's options named on failure)."""
    broker_tls.apply_auth(client, auth, tls=tls, tls_failed=_tls_failed)


def _tls_failed(exc: Exception) -> BusError:
    return BusError(
        f"cannot set up TLS to the broker ({exc}): check --broker-ca, --broker-cert "
        "and --broker-key"
    )
