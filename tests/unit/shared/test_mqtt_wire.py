"""The MQTT 3.1.1 packet helpers (shared/mqtt_wire.py), against bytes written out from MQTT 3.1.1.

Every expected packet here is spelled out by hand from the specification (fixed header: packet
type and flags, then the remaining length as a variable byte integer, seven bits a byte, least
significant group first, 0x80 meaning "more bytes follow"), never produced by the helpers under
test.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from shared.mqtt_wire import (
    ProtocolError,
    connect_packet,
    read_connack,
    read_disconnect,
    read_publishes,
    read_suback,
    split_packets,
    subscribe_packet,
)
from shared.transport import MqttAuth

CONNACK_OK = b"\x20\x02\x00\x00"
SUBACK_QOS1 = b"\x90\x03\x00\x01\x01"
PINGRESP = b"\xd0\x00"


def utf8(text: str) -> bytes:
    """An MQTT UTF-8 string: two-byte big-endian length, then the bytes."""
    raw = text.encode()
    return len(raw).to_bytes(2, "big") + raw


# --- split_packets ---------------------------------------------------------------------------


def test_split_packets_returns_every_packet_of_one_buffer_in_order() -> None:
    publish = b"\x30\x06\x00\x01t" + b"abc"  # QoS 0 PUBLISH, topic "t", payload "abc"
    buf = CONNACK_OK + SUBACK_QOS1 + PINGRESP + publish

    packets, used = split_packets(buf)

    assert packets == [
        (0x20, b"\x00\x00"),
        (0x90, b"\x00\x01\x01"),
        (0xD0, b""),
        (0x30, b"\x00\x01tabc"),
    ]
    assert used == len(buf)


def test_split_packets_accepts_a_bytearray() -> None:
    packets, used = split_packets(bytearray(CONNACK_OK + PINGRESP))

    assert packets == [(0x20, b"\x00\x00"), (0xD0, b"")]
    assert used == 6


def test_split_packets_of_nothing_is_nothing() -> None:
    assert split_packets(b"") == ([], 0)


@pytest.mark.parametrize(
    "tail",
    [
        b"\x30",  # only the first byte of the next packet
        b"\x30\x06",  # its fixed header, but none of its body
        b"\x30\x06\x00\x01t",  # part of its body
        b"\x30\x06\x00\x01tab",  # all but the last byte
        b"\x30\x80",  # a length field cut after a continuation byte
        b"\x30\xa3\x9c",  # a three-byte length field cut after two bytes
    ],
)
def test_split_packets_leaves_a_partial_packet_at_the_end(tail: bytes) -> None:
    whole = CONNACK_OK + PINGRESP

    packets, used = split_packets(whole + tail)

    assert packets == [(0x20, b"\x00\x00"), (0xD0, b"")]
    assert used == len(whole), "the partial packet's bytes are left for the next read"


def test_split_packets_finishes_a_partial_packet_once_the_rest_arrives() -> None:
    publish = b"\x30\x06\x00\x01tabc"
    buf = bytearray(CONNACK_OK + publish[:4])

    first, used = split_packets(buf)
    del buf[:used]
    buf += publish[4:]
    second, used = split_packets(buf)

    assert first == [(0x20, b"\x00\x00")]
    assert second == [(0x30, b"\x00\x01tabc")]
    assert used == len(publish)


def test_split_packets_reads_a_two_byte_remaining_length() -> None:
    body = b"\x00\x01t" + bytes(range(197))  # 200 bytes: 200 = 72 + 1 * 128 -> 0xC8 0x01
    buf = b"\x30\xc8\x01" + body + PINGRESP

    packets, used = split_packets(buf)

    assert packets == [(0x30, body), (0xD0, b"")]
    assert used == len(buf)


def test_split_packets_reads_a_20000_byte_payload() -> None:
    payload = bytes(i % 251 for i in range(20_000))
    body = b"\x00\x01t" + payload
    # 20,003 = 35 + 28 * 128 + 1 * 128**2: 0x23|0x80, 0x1C|0x80, 0x01.
    buf = b"\x30\xa3\x9c\x01" + body + CONNACK_OK

    packets, used = split_packets(buf)

    assert packets == [(0x30, body), (0x20, b"\x00\x00")]
    assert used == len(buf)


def test_split_packets_waits_for_the_rest_of_a_20000_byte_payload() -> None:
    body = b"\x00\x01t" + b"x" * 20_000
    buf = PINGRESP + b"\x30\xa3\x9c\x01" + body

    packets, used = split_packets(buf[:-1])

    assert packets == [(0xD0, b"")]
    assert used == 2


def test_a_four_byte_length_field_is_allowed() -> None:
    # 268,435,455 (0xFF 0xFF 0xFF 0x7F) is MQTT's largest packet: valid, and far from complete.
    packets, used = split_packets(PINGRESP + b"\x30\xff\xff\xff\x7f\x00\x01t")

    assert packets == [(0xD0, b"")]
    assert used == 2


@pytest.mark.parametrize(
    "length_field",
    [b"\xff\xff\xff\xff\x01", b"\x80\x80\x80\x80\x00", b"\xff\xff\xff\xff"],
)
def test_a_five_byte_length_field_is_a_protocol_error(length_field: bytes) -> None:
    with pytest.raises(ProtocolError):
        split_packets(PINGRESP + b"\x30" + length_field + b"\x00\x01t")


# --- read_publishes --------------------------------------------------------------------------


def test_a_qos0_publish_has_no_ack() -> None:
    messages, acks, other = read_publishes([(0x30, utf8("a/dev-1/telemetry") + b'{"v":1}')])

    assert messages == [("a/dev-1/telemetry", b'{"v":1}')]
    assert acks == b""
    assert other == []


def test_a_qos1_publish_is_acked_with_its_packet_id() -> None:
    body = utf8("a/dev-1/telemetry") + b"\x12\x34" + b"payload"

    messages, acks, other = read_publishes([(0x32, body)])

    assert messages == [("a/dev-1/telemetry", b"payload")]
    assert acks == b"\x40\x02\x12\x34"  # PUBACK, remaining length 2, packet id
    assert other == []


def test_the_acks_of_one_read_are_joined_in_order() -> None:
    packets = [
        (0x32, utf8("t/1") + b"\x00\x07" + b"one"),
        (0x30, utf8("t/2") + b"two"),  # QoS 0: no ack
        (0x3B, utf8("t/3") + b"\x01\x02" + b"three"),  # DUP, QoS 1, RETAIN
        (0x33, utf8("t/4") + b"\xff\xfe" + b""),  # QoS 1, RETAIN, empty payload
    ]

    messages, acks, other = read_publishes(packets)

    assert messages == [("t/1", b"one"), ("t/2", b"two"), ("t/3", b"three"), ("t/4", b"")]
    assert acks == b"\x40\x02\x00\x07" + b"\x40\x02\x01\x02" + b"\x40\x02\xff\xfe"
    assert other == []


def test_other_packets_come_back_in_order_between_publishes() -> None:
    packets = [
        (0x20, b"\x00\x00"),
        (0x32, utf8("t") + b"\x00\x01" + b"a"),
        (0x90, b"\x00\x01\x01"),
        (0x30, utf8("t") + b"b"),
        (0xD0, b""),
    ]

    messages, acks, other = read_publishes(packets)

    assert messages == [("t", b"a"), ("t", b"b")]
    assert acks == b"\x40\x02\x00\x01"
    assert other == [(0x20, b"\x00\x00"), (0x90, b"\x00\x01\x01"), (0xD0, b"")]


def test_a_topic_with_multibyte_characters_is_decoded() -> None:
    topic = "fleet/gerät-ü/telemetry"

    messages, _, _ = read_publishes([(0x30, utf8(topic) + b"x")])

    assert messages == [(topic, b"x")]


def test_a_qos2_publish_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        read_publishes([(0x34, utf8("t") + b"\x00\x01" + b"x")])


def test_nothing_is_nothing() -> None:
    assert read_publishes([]) == ([], b"", [])


def test_split_then_read_a_buffer_from_the_wire() -> None:
    wire = (
        b"\x32\x0b" + utf8("d/1/t") + b"\x00\x05" + b"ab"  # QoS 1, id 5
        b"\xd0\x00"  # PINGRESP
        b"\x30\x08" + utf8("d/2/t") + b"c"  # QoS 0
        b"\x32\x0b" + utf8("d/3/t")  # QoS 1, cut short
    )

    packets, used = split_packets(wire)
    messages, acks, other = read_publishes(packets)

    assert messages == [("d/1/t", b"ab"), ("d/2/t", b"c")]
    assert acks == b"\x40\x02\x00\x05"
    assert other == [(0xD0, b"")]
    assert used == 13 + 2 + 10


# --- connect_packet and subscribe_packet -----------------------------------------------------


def decode_connect(packet: bytes) -> dict[str, object]:
    """The fields of a CONNECT, read by hand (single-byte remaining length or more)."""
    assert packet[0] == 0x10, "CONNECT, no flags"
    length, shift, i = 0, 0, 1
    while True:
        byte = packet[i]
        length |= (byte & 0x7F) << shift
        i += 1
        if not byte & 0x80:
            break
        shift += 7
    body = packet[i:]
    assert len(body) == length, "the remaining length covers exactly the rest"

    def string(pos: int) -> tuple[str, int]:
        (n,) = struct.unpack_from("!H", body, pos)
        return body[pos + 2 : pos + 2 + n].decode(), pos + 2 + n

    name, pos = string(0)
    level, flags = body[pos], body[pos + 1]
    (keepalive,) = struct.unpack_from("!H", body, pos + 2)
    pos += 4
    client_id, pos = string(pos)
    fields: dict[str, object] = {
        "name": name,
        "level": level,
        "flags": flags,
        "keepalive": keepalive,
        "client_id": client_id,
    }
    if flags & 0x80:
        fields["username"], pos = string(pos)
    if flags & 0x40:
        fields["password"], pos = string(pos)
    assert pos == len(body), "nothing after the last field"
    return fields


def test_connect_without_credentials() -> None:
    packet = connect_packet("c1", 30, MqttAuth())

    assert packet == (
        b"\x10\x0e"  # CONNECT, remaining length 14
        b"\x00\x04MQTT"  # protocol name
        b"\x04"  # protocol level 4 (3.1.1)
        b"\x02"  # clean session only
        b"\x00\x1e"  # keepalive 30 s
        b"\x00\x02c1"  # client id
    )
    assert decode_connect(packet) == {
        "name": "MQTT",
        "level": 4,
        "flags": 0x02,
        "keepalive": 30,
        "client_id": "c1",
    }


def test_connect_with_user_name_and_password() -> None:
    packet = connect_packet("c1", 60, MqttAuth("user", "secret"))

    assert packet == (
        b"\x10\x1c"  # remaining length 28
        b"\x00\x04MQTT\x04"
        b"\xc2"  # user name, password, clean session
        b"\x00\x3c"  # keepalive 60 s
        b"\x00\x02c1"
        b"\x00\x04user"
        b"\x00\x06secret"
    )
    fields = decode_connect(packet)
    assert fields["flags"] == 0xC2
    assert (fields["username"], fields["password"]) == ("user", "secret")
    assert fields["keepalive"] == 60


def test_connect_with_a_user_name_only() -> None:
    packet = connect_packet("c1", 30, MqttAuth("user"))

    assert packet == b"\x10\x14\x00\x04MQTT\x04\x82\x00\x1e\x00\x02c1\x00\x04user"
    fields = decode_connect(packet)
    assert fields["flags"] == 0x82, "user name flag, no password flag, clean session"
    assert "password" not in fields


def test_connect_ignores_tls_material() -> None:
    auth = MqttAuth(ca_file=None, cert_file=None, key_file=None)
    tls = MqttAuth("u", "p", ca_file=Path("/nonexistent/ca.pem"))

    assert connect_packet("c", 5, auth) == b"\x10\x0d\x00\x04MQTT\x04\x02\x00\x05\x00\x01c"
    assert decode_connect(connect_packet("c", 5, tls))["password"] == "p"


def test_a_long_connect_has_a_two_byte_remaining_length() -> None:
    password = "p" * 300
    client_id = "jetfleet-ingest-0123456789ab"
    packet = connect_packet(client_id, 30, MqttAuth("ü-user", password))

    body_length = 10 + (2 + len(client_id)) + (2 + len("ü-user".encode())) + (2 + 300)
    assert body_length == 351  # 351 = 95 + 2 * 128: 0x5F|0x80, 0x02
    assert packet[1:3] == b"\xdf\x02"
    fields = decode_connect(packet)
    assert fields["client_id"] == client_id
    assert fields["username"] == "ü-user"
    assert fields["password"] == password
    assert fields["level"] == 4
    assert fields["flags"] == 0xC2


def test_connect_keepalive_is_big_endian() -> None:
    assert decode_connect(connect_packet("c", 0x0102, MqttAuth()))["keepalive"] == 258
    assert connect_packet("c", 0x0102, MqttAuth())[10:12] == b"\x01\x02"


def test_subscribe_one_filter_at_qos1() -> None:
    assert subscribe_packet(1, ["a/+/telemetry"]) == (
        b"\x82"  # SUBSCRIBE with its required flags 0b0010
        b"\x12"  # remaining length 18
        b"\x00\x01"  # packet id
        b"\x00\x0da/+/telemetry"
        b"\x01"  # requested QoS 1
    )


def test_subscribe_several_filters_each_at_qos1() -> None:
    share = "$share/jetfleet-ingest/p/+/telemetry"
    packet = subscribe_packet(0x1234, ["a/#", share])

    assert packet == (
        b"\x82"
        + bytes((2 + (2 + 3 + 1) + (2 + len(share) + 1),))
        + b"\x12\x34"
        + b"\x00\x03a/#\x01"
        + len(share).to_bytes(2, "big")
        + share.encode()
        + b"\x01"
    )


# --- MQTT 5.0 (the ingest link's persistent session) -----------------------------------------


def test_a_5_0_connect_keeps_the_session_with_its_expiry_and_receive_maximum() -> None:
    packet = connect_packet(
        "ing-1",
        30,
        MqttAuth("ctl", "pw"),
        clean=False,
        version=5,
        session_expiry_s=3600,
        receive_maximum=16384,
    )

    properties = b"\x08" + b"\x11\x00\x00\x0e\x10" + b"\x21\x40\x00"  # 5.0: 3.1.2.11
    variable = utf8("MQTT") + b"\x05" + b"\xc0" + b"\x00\x1e" + properties
    payload = utf8("ing-1") + utf8("ctl") + utf8("pw")
    body = variable + payload
    assert packet == bytes((0x10, len(body))) + body, "flags: user, password, no clean start"


def test_a_3_1_1_connect_can_keep_its_session() -> None:
    packet = connect_packet("c", 10, MqttAuth(), clean=False)

    body = utf8("MQTT") + b"\x04\x00\x00\x0a" + utf8("c")
    assert packet == bytes((0x10, len(body))) + body


def test_a_5_0_subscribe_carries_an_empty_properties_block() -> None:
    expected = b"\x82\x09" + b"\x00\x07" + b"\x00" + utf8("a/#") + b"\x01"
    assert subscribe_packet(7, ["a/#"], version=5) == expected


def test_a_5_0_publish_skips_its_properties_and_is_acknowledged_in_the_short_form() -> None:
    properties = b"\x02\x01\x01"  # length 2: payload format indicator = 1 (UTF-8)
    body = utf8("t/x") + b"\x12\x34" + properties + b"payload"

    messages, acks, other = read_publishes([(0x32, body)], version=5)

    assert messages == [("t/x", b"payload")]
    assert acks == b"\x40\x02\x12\x34"
    assert other == []


def test_connack_refusals_read_by_protocol_version() -> None:
    assert read_connack(b"\x01\x00", version=5) == (True, None)
    assert read_connack(b"\x00\x87", version=5) == (False, "not authorised")
    assert read_connack(b"\x00\x01", version=5) == (False, "unacceptable protocol version")
    assert read_connack(b"\x00\x05") == (False, "not authorised")


def test_suback_codes_skip_the_5_0_properties() -> None:
    assert read_suback(b"\x00\x01\x03\x1f\x00\x00\x01\x87", version=5) == [0x01, 0x87]
    assert read_suback(b"\x00\x01\x01\x80") == [0x01, 0x80]


def test_a_5_0_disconnect_names_its_reason() -> None:
    assert "taken over" in read_disconnect(b"\x8e\x00")
    assert read_disconnect(b"") == "normal disconnection"
