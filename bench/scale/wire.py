"""The MQTT 3.1.1 packets a simulated gateway sends beyond :mod:`shared.mqtt_wire`'s: CONNECT
with a Last Will and a device credential, and PUBLISH (section 3.1 and 3.3 of the standard)."""

from __future__ import annotations

import struct

from shared.mqtt_wire import mqtt_string, packet


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
        mqtt_string(client_id.encode())
        + mqtt_string(will_topic.encode())
        + mqtt_string(will_payload)
        + mqtt_string(username.encode())
        + mqtt_string(password.encode())
    )
    head = mqtt_string(b"MQTT") + bytes((4, flags)) + struct.pack("!H", keepalive_s)
    return packet(0x10, head + payload)


def publish_packet(
    topic: str, payload: bytes, *, packet_id: int, retain: bool = False, dup: bool = False
) -> bytes:
    """PUBLISH at QoS 1 (``packet_id`` 1..65535)."""
    first = 0x30 | (1 << 1) | (0x08 if dup else 0) | (0x01 if retain else 0)
    return packet(first, mqtt_string(topic.encode()) + struct.pack("!H", packet_id) + payload)


def puback_id(body: bytes) -> int:
    """The packet id a PUBACK acknowledges."""
    return int(struct.unpack_from("!H", body)[0])
