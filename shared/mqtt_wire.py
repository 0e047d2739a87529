"""MQTT 3.1.1 and 5.0 packets as bytes, for the two places that speak the protocol without paho.

:mod:`agent.link.broker_probe` (the doctor: one CONNECT, one CONNACK) and
:mod:`controller.ingest.link` (telemetry ingest: CONNECT, SUBSCRIBE, PUBLISH in, PUBACK out).
Pure functions over bytes, following the MQTT 3.1.1 specification (OASIS, 2014), section 2
(fixed header, remaining length) and section 3 (each control packet), and for ``version=5`` the
MQTT 5.0 specification (OASIS, 2019), whose packets add a properties block (a variable byte
integer length, then properties: 2.2.2) and reason codes (2.4). Ingest speaks 5 to brokers that
have it: a session expiry interval (3.1.2.11.2) and a receive maximum (3.1.2.11.3) are what make a
persistent telemetry session bounded and fast; 3.1.1 has neither.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from shared.transport import MqttAuth

CONNACK_REFUSALS = {
    # return code -> reason (3.2.2.3)
    1: "unacceptable protocol version",
    2: "client identifier rejected",
    3: "server unavailable",
    4: "bad user name or password",
    5: "not authorised",
}

CONNACK_REFUSALS_V5 = {
    # reason code -> reason (MQTT 5.0, 3.2.2.2); 0x80 and above are refusals
    0x80: "unspecified error",
    0x81: "malformed packet",
    0x82: "protocol error",
    0x83: "implementation specific error",
    0x84: "unacceptable protocol version",
    0x85: "client identifier rejected",
    0x86: "bad user name or password",
    0x87: "not authorised",
    0x88: "server unavailable",
    0x89: "server busy",
    0x8A: "banned",
    0x8C: "bad authentication method",
    0x90: "topic name invalid",
    0x95: "packet too large",
    0x97: "quota exceeded",
    0x99: "payload format invalid",
    0x9A: "retain not supported",
    0x9B: "QoS not supported",
    0x9C: "use another server",
    0x9D: "server moved",
    0x9F: "connection rate exceeded",
}

DISCONNECT_REASONS_V5 = {
    # reason code -> reason (MQTT 5.0, 3.14.2.1), as a server sends them
    0x00: "normal disconnection",
    0x80: "unspecified error",
    0x81: "malformed packet",
    0x82: "protocol error",
    0x87: "not authorised",
    0x89: "server busy",
    0x8B: "server shutting down",
    0x8D: "keep alive timeout",
    0x8E: "session taken over (another connection uses this client id)",
    0x93: "receive maximum exceeded",
    0x95: "packet too large",
    0x97: "quota exceeded",
    0x9C: "use another server",
    0x9D: "server moved",
}

# MQTT 5.0 property identifiers (2.2.2.2) the ingest link writes
_SESSION_EXPIRY_INTERVAL = 0x11
_RECEIVE_MAXIMUM = 0x21

Batch = list[tuple[str, bytes]]


class ProtocolError(Exception):
    """The broker sent something an MQTT 3.1.1 broker must not."""


def mqtt_string(value: str | bytes) -> bytes:
    """A UTF-8 string or binary data field: two-byte length, then the bytes (section 1.5.3)."""
    raw = value.encode() if isinstance(value, str) else value
    return struct.pack("!H", len(raw)) + raw


def remaining_length(n: int) -> bytes:
    """The fixed header's variable-length integer: 7 bits a byte, high bit "more" (2.2.3)."""
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def packet(first: int, body: bytes) -> bytes:
    """A control packet: its first byte (type and flags), the remaining length, the body."""
    return bytes((first,)) + remaining_length(len(body)) + body


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """The variable byte integer at ``pos`` and the position after it (2.2.3 / 1.5.5)."""
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ProtocolError("a variable byte integer cut short")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 21:
            raise ProtocolError("a variable byte integer longer than four bytes")


def connect_packet(
    client_id: str,
    keepalive_s: int,
    auth: MqttAuth,
    *,
    clean: bool = True,
    version: int = 4,
    session_expiry_s: int = 0,
    receive_maximum: int | None = None,
) -> bytes:
    """CONNECT with the user name and password when ``auth`` has them.

    ``version`` 4 is MQTT 3.1.1, 5 is MQTT 5.0. ``clean`` False keeps the session (its
    subscriptions and unacknowledged QoS 1 messages) on the broker across connections: in 3.1.1
    until a clean connection ends it, in 5.0 for ``session_expiry_s`` after the connection closes.
    ``receive_maximum`` (5.0 only) is how many QoS 1 messages the broker may have unacknowledged
    with this client at once (65,535 at most).
    """
    if version not in (4, 5):
        raise ValueError(f"MQTT protocol level {version}: only 4 (3.1.1) and 5 (5.0)")
    flags = 0x02 if clean else 0x00
    properties = b""
    if version == 5:
        props = bytearray()
        if session_expiry_s:
            props += bytes((_SESSION_EXPIRY_INTERVAL,)) + struct.pack("!I", session_expiry_s)
        if receive_maximum is not None:
            if not 1 <= receive_maximum <= 0xFFFF:
                raise ValueError("receive maximum must be 1 to 65535")
            props += bytes((_RECEIVE_MAXIMUM,)) + struct.pack("!H", receive_maximum)
        properties = remaining_length(len(props)) + bytes(props)
    payload = mqtt_string(client_id)
    if auth.username is not None:
        flags |= 0x80
        payload += mqtt_string(auth.username)
        if auth.password is not None:
            flags |= 0x40
            payload += mqtt_string(auth.password)
    head = mqtt_string("MQTT") + bytes((version, flags)) + struct.pack("!H", keepalive_s)
    return packet(0x10, head + properties + payload)


def subscribe_packet(packet_id: int, filters: Sequence[str], version: int = 4) -> bytes:
    """SUBSCRIBE to every filter at QoS 1 (5.0: no properties, subscription options QoS 1)."""
    body = struct.pack("!H", packet_id) + (b"\x00" if version == 5 else b"")
    body += b"".join(mqtt_string(f) + b"\x01" for f in filters)
    return packet(0x82, body)


def read_connack(body: bytes, version: int = 4) -> tuple[bool, str | None]:
    """(session present, why the broker refused or None) from a CONNACK's body."""
    if len(body) < 2:
        raise ProtocolError("a CONNACK shorter than two bytes")
    present = bool(body[0] & 0x01)
    code = body[1]
    if not code:
        return present, None
    if version == 5 and code >= 0x80:
        return present, CONNACK_REFUSALS_V5.get(code, f"reason code 0x{code:02x}")
    # A 3.1.1-only broker answers a 5.0 CONNECT with its own return code 1 (3.1.4).
    return present, CONNACK_REFUSALS.get(code, f"return code {code}")


def read_suback(body: bytes, version: int = 4) -> list[int]:
    """The return/reason code per filter of a SUBACK's body (0x80 and above: refused)."""
    pos = 2
    if version == 5:
        length, pos = _varint(body, pos)
        pos += length
    return list(body[pos:])


def read_disconnect(body: bytes) -> str:
    """Why a 5.0 broker closed the connection, from its DISCONNECT's body."""
    code = body[0] if body else 0
    return DISCONNECT_REASONS_V5.get(code, f"reason code 0x{code:02x}")


PINGREQ = b"\xc0\x00"
DISCONNECT = b"\xe0\x00"


def split_packets(buf: bytearray | bytes) -> tuple[list[tuple[int, bytes]], int]:
    """Every complete packet at the start of ``buf`` as (first byte, body), and bytes used.

    A partial packet at the end stays for the next read. ProtocolError for a length field of
    more than four bytes (MQTT's limit).
    """
    packets: list[tuple[int, bytes]] = []
    pos, end = 0, len(buf)
    while pos + 2 <= end:
        first = buf[pos]
        length, shift, i = 0, 0, pos + 1
        while True:
            if i >= end:
                return packets, pos
            byte = buf[i]
            length |= (byte & 0x7F) << shift
            i += 1
            if not byte & 0x80:
                break
            shift += 7
            if shift > 21:
                raise ProtocolError("a packet length field longer than four bytes")
        if i + length > end:
            return packets, pos
        packets.append((first, bytes(buf[i : i + length])))
        pos = i + length
    return packets, pos


def read_publishes(
    packets: list[tuple[int, bytes]], version: int = 4
) -> tuple[Batch, bytes, list[tuple[int, bytes]]]:
    """The PUBLISHes among ``packets`` as (topic, payload), their PUBACKs as one write, and the
    other packets (CONNACK, SUBACK, PINGRESP, DISCONNECT) in order.

    5.0: the properties after the packet identifier are skipped, and each PUBACK is the short
    form (remaining length 2: reason code 0, success, and no properties; 3.4.2.1)."""
    messages: Batch = []
    acks: list[bytes] = []
    other: list[tuple[int, bytes]] = []
    for first, body in packets:
        if first >> 4 != 3:
            other.append((first, body))
            continue
        (topic_len,) = struct.unpack_from("!H", body)
        topic = body[2 : 2 + topic_len].decode("utf-8", "replace")
        qos = (first >> 1) & 0x03
        start = 2 + topic_len
        if qos:
            if qos == 2:
                raise ProtocolError("a QoS 2 PUBLISH on a QoS 1 subscription")
            acks.append(b"\x40\x02" + body[start : start + 2])
            start += 2
        if version == 5:
            length, start = _varint(body, start)
            start += length
        messages.append((topic, body[start:]))
    return messages, b"".join(acks), other
