"""The agent's MQTT link: the only module that imports paho (2.x, callback API v2).

Presence: the Last Will is a retained ``Status(offline)`` on ``<prefix>/<id>/status``; every
(re)connect first runs ``on_connected`` (the daemon republishes its reported state there, so a
controller meets the device with its labels and facts), then publishes a retained
``Status(online)`` and subscribes to ``<prefix>/<id>/desired``.
paho's network thread reconnects with a growing delay; QoS 1 messages published while the link
is down are queued by paho and sent after the reconnect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from pydantic import BaseModel

from agent.errors import StartupError
from shared.codec import MessageError, decode, encode
from shared.messages import DesiredState, Event, ReportedState, Status, Telemetry
from shared.topics import Channel, Topics

log = logging.getLogger(__name__)

KEEPALIVE_S = 30
RECONNECT_MIN_S = 1
RECONNECT_MAX_S = 30


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
    ) -> None:
        self._host = host
        self._port = port
        self._device_id = device_id
        self._topics = topics
        self._on_desired = on_desired
        self._on_connected = on_connected
        self._client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=f"jetfleet-agent-{device_id}"
        )
        self._client.will_set(
            topics.device(device_id, Channel.STATUS),
            encode(Status(device_id=device_id, state="offline")),
            qos=1,
            retain=True,
        )
        self._client.reconnect_delay_set(RECONNECT_MIN_S, RECONNECT_MAX_S)
        self._client.on_connect = self._handle_connect
        self._client.on_disconnect = self._handle_disconnect
        self._client.on_message = self._handle_message

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
        self._publish(Channel.REPORTED, reported, qos=1, retain=True)

    def publish_telemetry(self, sample: Telemetry) -> None:
        """Publish one telemetry sample (QoS 1)."""
        self._publish(Channel.TELEMETRY, sample, qos=1, retain=False)

    def publish_event(self, event: Event) -> None:
        """Publish one event (QoS 1)."""
        self._publish(Channel.EVENTS, event, qos=1, retain=False)

    def _publish(
        self, channel: Channel, message: BaseModel, qos: int, retain: bool
    ) -> mqtt.MQTTMessageInfo | None:
        topic = self._topics.device(self._device_id, channel)
        info = self._client.publish(topic, encode(message), qos=qos, retain=retain)
        if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
            log.warning("publish to %s failed: %s", topic, mqtt.error_string(info.rc))
            return None
        return info

    def _handle_connect(
        self,
        client: mqtt.Client,
        userdata: Any,
        flags: mqtt.ConnectFlags,
        reason_code: Any,
        properties: Any,
    ) -> None:
        if reason_code.is_failure:
            log.warning(
                "broker %s:%s refused the connection: %s", self._host, self._port, reason_code
            )
            return
        log.info("connected to broker %s:%s", self._host, self._port)
        if self._on_connected is not None:
            try:
                self._on_connected()
            except Exception:
                log.exception("on_connected handler failed")
        online = Status(device_id=self._device_id, state="online", ts=datetime.now(timezone.utc))
        self._publish(Channel.STATUS, online, qos=1, retain=True)
        client.subscribe(self._topics.device(self._device_id, Channel.DESIRED), qos=1)

    def _handle_disconnect(
        self,
        client: mqtt.Client,
        userdata: Any,
        flags: mqtt.DisconnectFlags,
        reason_code: Any,
        properties: Any,
    ) -> None:
        if reason_code.is_failure:
            log.warning("lost the broker (%s); reconnecting", reason_code)

    def _handle_message(self, client: mqtt.Client, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        if not msg.payload:
            log.info("desired document on %s was cleared; keeping the current state", msg.topic)
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
