"""The agent's MQTT link: the only module that imports paho (2.x, callback API v2).

Presence: the Last Will is a retained ``Status(offline)`` on ``<prefix>/<id>/status``; every
(re)connect first runs ``on_connected`` (the daemon republishes its reported state there, so a
controller meets the device with its labels and facts), then publishes a retained
``Status(online)`` and subscribes to ``<prefix>/<id>/desired``.
paho's network thread reconnects with a growing delay.

Telemetry and events do not go through paho's memory queue: they leave the agent's disk spool one
at a time through :meth:`MqttLink.publish_spooled`, which answers ``True`` only once the broker
acknowledged the message (PUBACK). paho re-sends an unacknowledged QoS 1 message by itself after a
reconnect, so a retried entry waits for that earlier message rather than publishing a second copy.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from pydantic import BaseModel

from agent.errors import StartupError
from agent.link.spool import SpoolEntry
from shared.broker_tls import AGENT_FIXES, apply_auth, explain_connect_error
from shared.codec import MessageError, decode, encode
from shared.messages import DesiredState, ReportedState, Status
from shared.topics import Channel, Topics
from shared.transport import MqttAuth, agent_client_id

log = logging.getLogger(__name__)

KEEPALIVE_S = 30
RECONNECT_MIN_S = 1
RECONNECT_MAX_S = 30
ACK_TIMEOUT_S = 5.0
"""How long :meth:`MqttLink.publish_spooled` waits for a PUBACK before it answers ``False``."""
RESEND_AFTER_S = 120.0
"""A spooled message unacknowledged this long on a live session is published again (a duplicate
at worst, which its idempotency key absorbs), in case the client dropped it."""
MAX_DESIRED_BYTES = 1024 * 1024
"""A desired document larger than this is ignored undecoded (a real one is a few KiB)."""


class Acks:
    """PUBACKs seen by paho's thread, numbered, so a waiter knows which came after its publish.

    paho may run ``on_publish`` before ``publish()`` returned the message id, and reuses ids after
    65535 messages; comparing the ack's number with one taken just before the publish answers both.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._count = 0
        self._last: dict[int, int] = {}

    def mark(self) -> int:
        """The current ack number; take it just before publishing."""
        with self._cond:
            return self._count

    def add(self, mid: int) -> None:
        """Record the broker's acknowledgement of message ``mid`` (paho's thread)."""
        with self._cond:
            self._count += 1
            self._last[mid] = self._count
            self._cond.notify_all()

    def seen(self, mid: int, since: int) -> bool:
        """True when ``mid`` was acknowledged after ack number ``since``."""
        with self._cond:
            return self._last.get(mid, -1) > since

    def wait(self, mid: int, since: int, timeout_s: float, alive: Callable[[], bool]) -> bool:
        """Wait up to ``timeout_s`` for ``mid``'s ack; give up early once ``alive()`` is False."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._last.get(mid, -1) <= since:
                left = deadline - time.monotonic()
                if left <= 0 or not alive():
                    return False
                self._cond.wait(min(left, 0.25))
            return True


@dataclass(frozen=True)
class _Sent:
    mid: int
    since: int
    at: float


class MqttLink:
    """Connects one device to the broker; hands decoded desired documents to ``on_desired``."""

    def __init__(
        self,
        host: str,
        port: int,
        device_id: str,
        topics: Topics,
        on_desired: Callable[[DesiredState], None],
        on_connected: Callable[[], None] | None = None,
        auth: MqttAuth | None = None,
        tls: bool = False,
        max_desired_bytes: int = MAX_DESIRED_BYTES,
    ) -> None:
        self._host = host
        self._max_desired = max_desired_bytes
        self._connect_error: str | None = None
        self._paho_error: str | None = None
        self._session_up = False
        self._port = port
        self._device_id = device_id
        self._topics = topics
        self._on_desired = on_desired
        self._on_connected = on_connected
        self._client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=agent_client_id(device_id)
        )
        self._client.will_set(
            topics.device(device_id, Channel.STATUS),
            encode(Status(device_id=device_id, state="offline")),
            qos=1,
            retain=True,
        )
        auth = auth or MqttAuth()
        apply_auth(self._client, auth, tls=tls, tls_failed=_tls_failed(auth))
        self._client.reconnect_delay_set(RECONNECT_MIN_S, RECONNECT_MAX_S)
        self._client.on_connect = self._handle_connect
        self._client.on_connect_fail = self._handle_connect_fail
        self._client.on_log = self._handle_paho_log
        self._client.on_disconnect = self._handle_disconnect
        self._client.on_message = self._handle_message
        self._client.on_publish = self._handle_publish
        self._acks = Acks()
        self._sent: dict[str, _Sent] = {}
        self._reported: list[_Sent] = []
        self._reported_acked = False
        self._reported_lock = threading.Lock()

    @property
    def connected(self) -> bool:
        """True while the broker session is up."""
        return self._client.is_connected()

    def start(self) -> None:
        """Connect in the background; keeps retrying while the broker is unreachable."""
        try:
            self._client.connect_async(self._host, self._port, keepalive=KEEPALIVE_S)
        except (OSError, ValueError) as exc:
            raise StartupError(f"cannot use broker {self._host}:{self._port}: {exc}") from exc
        self._client.loop_start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Publish the retained offline status, then disconnect cleanly."""
        if self._client.is_connected():
            status = Status(
                device_id=self._device_id, state="offline", ts=datetime.now(timezone.utc)
            )
            info = self._publish(Channel.STATUS, status, qos=1, retain=True)
            if info is not None:
                try:
                    info.wait_for_publish(timeout_s)
                except (RuntimeError, ValueError) as exc:
                    log.warning("offline status not confirmed by the broker: %s", exc)
        self._client.disconnect()
        self._client.loop_stop()

    def publish_reported(self, reported: ReportedState) -> None:
        """Publish the reported state (QoS 1, retained)."""
        since = self._acks.mark()
        info = self._publish(Channel.REPORTED, reported, qos=1, retain=True)
        if info is not None:
            with self._reported_lock:
                if not self._reported_acked:
                    self._reported = [
                        *self._reported[-31:],
                        _Sent(info.mid, since, time.monotonic()),
                    ]

    @property
    def reported_acked(self) -> bool:
        """True once the broker acknowledged any reported state of this link."""
        with self._reported_lock:
            if not self._reported_acked:
                self._reported_acked = any(self._acks.seen(s.mid, s.since) for s in self._reported)
                if self._reported_acked:
                    self._reported.clear()
            return self._reported_acked

    def publish_spooled(self, entry: SpoolEntry, timeout_s: float = ACK_TIMEOUT_S) -> bool:
        """Publish one spool entry (QoS 1) on its channel and wait for the broker's PUBACK.

        ``False`` without publishing while disconnected, and when no PUBACK came within
        ``timeout_s``. An entry whose earlier publish is still unacknowledged is not published
        again: paho re-sends that one after a reconnect, so this waits for it.
        """
        try:
            channel = Channel(entry.channel)
        except ValueError:
            log.error("dropping spooled message %s: unknown channel %r", entry.key, entry.channel)
            return True
        sent = self._sent.get(entry.key)
        now = time.monotonic()
        if sent is not None and self.connected and now - sent.at > RESEND_AFTER_S:
            log.warning(
                "no PUBACK for %s after %.0f s; publishing it again", entry.key, now - sent.at
            )
            sent = None
        if sent is None:
            if not self.connected:
                return False
            topic = self._topics.device(self._device_id, channel)
            since = self._acks.mark()
            info = self._client.publish(topic, entry.payload, qos=1, retain=False)
            if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
                log.warning("publish to %s failed: %s", topic, mqtt.error_string(info.rc))
                return False
            sent = _Sent(info.mid, since, now)
            self._sent[entry.key] = sent
            log.debug("published %s as message %d (rc %s)", entry.key, info.mid, info.rc)
        if not self._acks.wait(sent.mid, sent.since, timeout_s, lambda: self.connected):
            log.debug("no PUBACK for %s (message %d) yet", entry.key, sent.mid)
            return False
        del self._sent[entry.key]
        log.debug("PUBACK for %s (message %d)", entry.key, sent.mid)
        return True

    def _publish(
        self, channel: Channel, message: BaseModel, qos: int, retain: bool
    ) -> mqtt.MQTTMessageInfo | None:
        topic = self._topics.device(self._device_id, channel)
        info = self._client.publish(topic, encode(message), qos=qos, retain=retain)
        if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
            log.warning("publish to %s failed: %s", topic, mqtt.error_string(info.rc))
            return None
        return info

    def _handle_publish(
        self, client: mqtt.Client, userdata: Any, mid: int, reason_code: Any, properties: Any
    ) -> None:
        self._acks.add(mid)

    def _handle_connect(
        self,
        client: mqtt.Client,
        userdata: Any,
        flags: mqtt.ConnectFlags,
        reason_code: Any,
        properties: Any,
    ) -> None:
        self._paho_error = None
        if reason_code.is_failure:
            log.warning(
                "broker %s:%s refused the connection: %s", self._host, self._port, reason_code
            )
            return
        log.info("connected to broker %s:%s", self._host, self._port)
        self._connect_error = None
        self._session_up = True
        if self._on_connected is not None:
            try:
                self._on_connected()
            except Exception:
                log.exception("on_connected handler failed")
        online = Status(device_id=self._device_id, state="online", ts=datetime.now(timezone.utc))
        self._publish(Channel.STATUS, online, qos=1, retain=True)
        client.subscribe(self._topics.device(self._device_id, Channel.DESIRED), qos=1)

    def _handle_connect_fail(self, client: mqtt.Client, userdata: Any) -> None:
        """paho calls this inside its ``except OSError``: the exception is the current one."""
        self._note_connect_error(explain_connect_error(sys.exc_info()[1], AGENT_FIXES))

    def _handle_paho_log(self, client: mqtt.Client, userdata: Any, level: int, buf: str) -> None:
        if level == mqtt.MQTT_LOG_ERR:
            self._paho_error = buf

    def _note_connect_error(self, error: str) -> None:
        """Log why connecting failed, once per distinct reason while the failures last."""
        if error != self._connect_error:
            log.warning("cannot connect to broker %s:%s: %s", self._host, self._port, error)
        self._connect_error = error

    def _handle_disconnect(
        self,
        client: mqtt.Client,
        userdata: Any,
        flags: mqtt.DisconnectFlags,
        reason_code: Any,
        properties: Any,
    ) -> None:
        if not self._session_up:
            if self._paho_error is not None:
                self._note_connect_error(explain_connect_error(self._paho_error, AGENT_FIXES))
                self._paho_error = None
            return
        self._session_up = False
        if reason_code.is_failure:
            log.warning("lost the broker (%s); reconnecting", reason_code)

    def _handle_message(self, client: mqtt.Client, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        if not msg.payload:
            log.info("desired document on %s was cleared; keeping the current state", msg.topic)
            return
        if len(msg.payload) > self._max_desired:
            log.error(
                "ignored desired document on %s: %d bytes, over the %d-byte limit",
                msg.topic,
                len(msg.payload),
                self._max_desired,
            )
            return
        try:
            desired = decode(DesiredState, bytes(msg.payload))
        except MessageError as exc:
            log.warning(
                "ignored malformed desired document on %s: field %s: %s",
                msg.topic,
                exc.field,
                exc.reason,
            )
            return
        if desired.device_id != self._device_id:
            log.warning(
                "ignored desired document on %s: field device_id: %r is not this device",
                msg.topic,
                desired.device_id,
            )
            return
        try:
            self._on_desired(desired)
        except Exception:
            log.exception("desired-state handler failed")


def _tls_failed(auth: MqttAuth) -> Callable[[Exception], Exception]:
    def failed(exc: Exception) -> Exception:
        return StartupError(
            f"cannot set up TLS to the broker ({exc}): check broker_ca_file "
            f"({auth.ca_file}), broker_cert_file and broker_key_file"
        )

    return failed
