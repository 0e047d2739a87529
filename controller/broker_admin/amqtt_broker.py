"""amqtt's ``Broker`` with the five holes a security probe found closed, for the embedded broker.

amqtt 0.12.1 (pinned) gets these wrong, and its plugin hooks cannot reach them:

1. **Session state before authentication.** ``_initialize_client_session`` deletes the stored
   session of a ``clean_session=1`` CONNECT's client id (or takes over a ``clean_session=0``
   one) before any plugin has checked the password, so an anonymous client using a gateway's
   client id wiped that gateway's subscriptions. :class:`GuardedBroker` authenticates first;
   a refused CONNECT gets its CONNACK and touches no session.
2. **Retained messages at CONNECT.** ``_handle_client_session`` sends the new client the
   retained messages matching *every* live subscription of *any* client, with no read check.
   Here retained messages go only to a session that holds the matching subscription itself,
   and only where the topic ACL lets it receive them (the same ``RECEIVE`` check live
   messages get).
3. **Packet size.** Any packet up to MQTT's 256 MiB limit was read into memory and fanned
   out. :class:`PacketSizeCap` tracks MQTT framing on the connection's reader and drops the
   connection as soon as a fixed header announces more than ``max_packet_bytes``.
4. **Take-over with a clean session.** A ``clean_session=1`` CONNECT erased the session of its
   client id but left that client's older connection open and subscribed to nothing. Here the
   older connection is closed first, as MQTT 3.1.1 §3.1.4 says.
5. **Retained store.** Any size and any number of retained messages were kept. Here one
   retained message may be at most ``max_retained_bytes`` and the store at most
   ``max_retained_messages`` topics; beyond either the message is still delivered live but
   not retained (logged).

Client ids bound to credentials are the rule of the auth plugin in
:mod:`controller.broker_admin.embedded`; this module makes sure that rule runs before anything
happens to a session. Only this module and :mod:`controller.broker_admin.embedded` import amqtt.
"""

from __future__ import annotations

import logging
from typing import Any

from amqtt.adapters import ReaderAdapter, WriterAdapter
from amqtt.broker import Broker
from amqtt.contexts import Action
from amqtt.errors import AMQTTError, MQTTError
from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
from amqtt.session import Session
from amqtt.utils import gen_client_id

logger = logging.getLogger(__name__)

DEFAULT_MAX_RETAINED_BYTES = 1024 * 1024 + 64 * 1024
"""A desired document may be up to 1 MiB (the agent's cap); status and reports are far smaller."""

DEFAULT_MAX_RETAINED_MESSAGES = 200_000
"""Five retained topics per device (desired, reported, status and two spare) for 40,000 devices."""


class PacketTooLarge(ConnectionError):
    """A client announced a packet over the broker's cap; its connection is dropped."""


class PacketSizeCap(ReaderAdapter):  # type: ignore[misc]
    """A reader that follows MQTT framing (fixed header byte, remaining-length varint, body)
    over everything amqtt reads, and refuses a packet whose remaining length exceeds ``cap``
    before its body is read."""

    def __init__(self, inner: ReaderAdapter, cap: int) -> None:
        self._inner = inner
        self._cap = cap
        self._state = 0  # 0: first header byte, 1: remaining length varint, 2: body
        self._length = 0
        self._multiplier = 1
        self._body_left = 0

    async def read(self, n: int = -1) -> bytes:
        data: bytes = await self._inner.read(n)
        self._follow(data)
        return data

    def feed_eof(self) -> None:
        self._inner.feed_eof()

    def _follow(self, data: bytes) -> None:
        i, end = 0, len(data)
        while i < end:
            if self._state == 2:
                step = min(self._body_left, end - i)
                self._body_left -= step
                i += step
                if self._body_left == 0:
                    self._state = 0
                continue
            byte = data[i]
            i += 1
            if self._state == 0:
                self._state, self._length, self._multiplier = 1, 0, 1
                continue
            self._length += (byte & 0x7F) * self._multiplier
            self._multiplier *= 128
            if byte & 0x80:
                continue
            if self._length > self._cap:
                raise PacketTooLarge(
                    f"packet of {self._length} bytes exceeds the broker's cap of {self._cap}"
                )
            self._body_left = self._length
            self._state = 2 if self._length else 0


class GuardedBroker(Broker):  # type: ignore[misc]
    """amqtt's broker, authenticating before any session is touched and checking reads of
    retained messages; see the module docstring."""

    def __init__(
        self,
        config: dict[str, Any],
        *,
        max_packet_bytes: int,
        max_retained_bytes: int = DEFAULT_MAX_RETAINED_BYTES,
        max_retained_messages: int = DEFAULT_MAX_RETAINED_MESSAGES,
    ) -> None:
        super().__init__(config)
        self.max_packet_bytes = max_packet_bytes
        self.max_retained_bytes = max_retained_bytes
        self.max_retained_messages = max_retained_messages
        self._admitted: set[int] = set()

    async def _client_connected(
        self, listener_name: str, reader: ReaderAdapter, writer: WriterAdapter
    ) -> None:
        capped = PacketSizeCap(reader, self.max_packet_bytes)
        await super()._client_connected(listener_name, capped, writer)

    async def _initialize_client_session(
        self,
        reader: ReaderAdapter,
        writer: WriterAdapter,
        remote_address: str,
        remote_port: int,
    ) -> tuple[BrokerProtocolHandler, Session]:
        """Upstream's, with authentication moved before the clean-session delete and the
        persistent-session take-over."""
        try:
            handler, incoming = await BrokerProtocolHandler.init_from_connect(
                reader, writer, self.plugins_manager
            )
        except MQTTError:
            await writer.close()
            raise
        except PacketTooLarge as exc:
            logger.warning("embedded broker: %s:%s %s", remote_address, remote_port, exc)
            await writer.close()
            raise AMQTTError(str(exc)) from exc
        if incoming.clean_session and not incoming.client_id:
            incoming.client_id = gen_client_id()
        incoming.remote_address = remote_address  # failed logins are counted per address
        if not await super()._authenticate(incoming, None):
            incoming.parent = 0
            handler.attach(incoming, reader, writer)
            await handler.mqtt_connack_authorize(False)
            await writer.close()
            raise AMQTTError(f"CONNECT of client id {incoming.client_id!r} not authorized")

        session = incoming
        if incoming.clean_session:
            await self._close_older_connection(incoming.client_id)
            await self._delete_session(incoming.client_id)
            session.parent = 0
        elif incoming.client_id in self._sessions:
            session, _ = self._sessions[incoming.client_id]
            for attr in (
                "will_flag",
                "will_message",
                "will_topic",
                "will_qos",
                "will_retain",
                "keep_alive",
                "username",
                "password",
            ):
                setattr(session, attr, getattr(incoming, attr))
            session.parent = 1
        else:
            session.parent = 0
        delay = self.config.get("timeout-disconnect-delay", 0)
        if session.keep_alive > 0 and isinstance(delay, int):
            session.keep_alive += delay
        self._admitted.add(id(session))
        return handler, session

    async def _close_older_connection(self, client_id: str) -> None:
        """MQTT 3.1.1 §3.1.4: a CONNECT with the client id of a connected client disconnects it.
        amqtt does so only for persistent sessions; a clean one left the older connection
        open, subscribed to nothing, so that client silently missed everything after."""
        older, handler = self._sessions.get(client_id, (None, None))
        if older is None or handler is None or not older.transitions.is_connected():
            return
        logger.info(
            "embedded broker: client id %r connected again; closing the older link", client_id
        )
        await handler.handle_connection_closed()
        await handler.stop()

    async def _authenticate(self, session: Session, listener: Any) -> bool:
        """Already done in :meth:`_initialize_client_session` for every session that gets here."""
        if id(session) in self._admitted:
            self._admitted.discard(id(session))
            return True
        return bool(await super()._authenticate(session, listener))

    async def _publish_retained_messages_for_subscription(
        self, subscription: tuple[str, int], session: Session
    ) -> None:
        """Retained messages for ``subscription`` only if ``session`` holds it, each only if the
        topic ACL lets ``session`` receive it."""
        topic_filter, qos = subscription
        holders = self._subscriptions.get(topic_filter, [])
        held = [q for s, q in holders if s.client_id == session.client_id]
        if not held:
            return
        handler = self._get_handler(session)
        if handler is None:
            return
        for topic, retained in list(self._retained_messages.items()):
            if not self._matches(topic, topic_filter):
                continue
            if not await self._topic_filtering(session, topic=topic, action=Action.RECEIVE):
                continue
            granted = min(qos, held[0])
            await handler.mqtt_publish(
                retained.topic, retained.data, min(granted, retained.qos or granted), retain=True
            )

    async def retain_message(
        self,
        source_session: Session | None,
        topic_name: str | None,
        data: bytes | bytearray | None,
        qos: int | None = None,
    ) -> None:
        """Upstream's, refusing to retain messages over the size or count caps."""
        if data and topic_name is not None:
            if len(data) > self.max_retained_bytes:
                logger.warning(
                    "embedded broker: not retaining %d bytes on %s (cap %d bytes)",
                    len(data),
                    topic_name,
                    self.max_retained_bytes,
                )
                return
            fresh = topic_name not in self._retained_messages
            if fresh and len(self._retained_messages) >= self.max_retained_messages:
                logger.warning(
                    "embedded broker: not retaining on %s: %d retained topics already (cap)",
                    topic_name,
                    len(self._retained_messages),
                )
                return
        await super().retain_message(source_session, topic_name, data, qos)
