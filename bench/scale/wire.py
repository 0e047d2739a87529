"""The MQTT 3.1.1 packets a simulated gateway sends beyond :mod:`shared.mqtt_wire`'s: CONNECT
with a Last Will and a device credential, and PUBLISH (section 3.1 and 3.3 of the standard)."""

from __future__ import annotations

import struct


def _string(raw: bytes) -> bytes:
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


def connect_packet(
    client_id: str,
    username: str,
    password: str,
    keepalive_s: int,
    will_topic: str,
    will_payload: bytes,
) -> bytes:
    """CONNECT, clean session, user name and password, a retained QoS 1 Last Will."""
    flags = 0x02 | 0x04 | (1 << 3) | 0x20 | 0x80 | 0x40
    payload = (
        _string(client_id.encode())
        + _string(will_topic.encode())
        + _string(will_payload)
        + _string(username.encode())
        + _string(password.encode())
    )
    head = _string(b"MQTT") + bytes((4, flags)) + struct.pack("!H", keepalive_s)
    return _packet(0x10, head + payload)


def publish_packet(
    topic: str, payload: bytes, *, packet_id: int, retain: bool = False, dup: bool = False
) -> bytes:
    """PUBLISH at QoS 1 (``packet_id`` 1..65535)."""
    first = 0x30 | (1 << 1) | (0x08 if dup else 0) | (0x01 if retain else 0)
    return _packet(first, _string(topic.encode()) + struct.pack("!H", packet_id) + payload)


def puback_id(body: bytes) -> int:
    """The packet id a PUBACK acknowledges."""
    return int(struct.unpack_from("!H", body)[0])
