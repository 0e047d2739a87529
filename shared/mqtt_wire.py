"""MQTT 3.1.1 packets as bytes, for the two places that speak the protocol without paho.

:mod:`agent.link.broker_probe` (the doctor: one CONNECT, one CONNACK) and
:mod:`controller.ingest.link` (telemetry ingest: CONNECT, SUBSCRIBE, PUBLISH in, PUBACK out).
Pure functions over bytes, following the MQTT 3.1.1 specification (OASIS, 2014), section 2
(fixed header, remaining length) and section 3 (each control packet).
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

Batch = list[tuple[str, bytes]]


class ProtocolError(Exception):
    """The broker sent something an MQTT 3.1.1 broker must not."""


def _string(value: str | bytes) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return struct.pack("!H", len(raw)) + raw


def _remaining_length(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _packet(first: int, body: bytes) -> bytes:
    return bytes((first,)) + _remaining_length(len(body)) + body


def connect_packet(client_id: str, keepalive_s: int, auth: MqttAuth) -> bytes:
    """CONNECT, clean session, with the user name and password when ``auth`` has them."""
    flags = 0x02
    payload = _string(client_id)
    if auth.username is not None:
        flags |= 0x80
        payload += _string(auth.username)
        if auth.password is not None:
            flags |= 0x40
            payload += _string(auth.password)
    return _packet(
        0x10, _string("MQTT") + bytes((4, flags)) + struct.pack("!H", keepalive_s) + payload
    )


def subscribe_packet(packet_id: int, filters: Sequence[str]) -> bytes:
    """SUBSCRIBE to every filter at QoS 1."""
    body = struct.pack("!H", packet_id) + b"".join(_string(f) + b"\x01" for f in filters)
    return _packet(0x82, body)


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
    packets: list[tuple[int, bytes]],
) -> tuple[Batch, bytes, list[tuple[int, bytes]]]:
    """The PUBLISHes among ``packets`` as (topic, payload), their PUBACKs as one write, and the
    other packets (CONNACK, SUBACK, PINGRESP) in order."""
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
        messages.append((topic, body[start:]))
    return messages, b"".join(acks), other
