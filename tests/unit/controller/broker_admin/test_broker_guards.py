"""The embedded broker's pure guards: which client ids a credential may use, and the packet
size cap that follows MQTT framing over however the bytes arrive."""

from __future__ import annotations

import asyncio

import pytest

from controller.broker_admin.acl import client_id_allowed
from controller.broker_admin.amqtt_broker import PacketSizeCap, PacketTooLarge
from shared.mqtt_wire import connect_packet
from shared.transport import MqttAuth, agent_client_id


def test_a_device_may_use_only_its_own_agent_client_id() -> None:
    assert client_id_allowed("gw-a", agent_client_id("gw-a"))
    assert not client_id_allowed("gw-a", agent_client_id("gw-b"))
    assert not client_id_allowed("gw-a", agent_client_id("gw-a") + "x")
    assert not client_id_allowed("gw-a", "jetfleet-controller-0123")
    assert not client_id_allowed("gw-a", "")


def test_the_controller_may_not_use_an_agents_client_id() -> None:
    assert client_id_allowed(None, "jetfleet-controller-0123456789ab")
    assert client_id_allowed(None, "jetfleet-ingest-0-0123456789ab")
    assert not client_id_allowed(None, agent_client_id("gw-a"))


class _Bytes:
    """An amqtt-style reader over fixed bytes, handing out at most ``chunk`` per read."""

    def __init__(self, data: bytes, chunk: int) -> None:
        self._data = data
        self._chunk = chunk

    async def read(self, n: int = -1) -> bytes:
        size = len(self._data) if n < 0 else n
        out, self._data = self._data[: min(size, self._chunk)], self._data[min(size, self._chunk) :]
        return out

    def feed_eof(self) -> None:
        return


def _publish(payload_len: int) -> bytes:
    body = b"\x00\x03a/b" + b"p" * payload_len
    length, encoded = len(body), bytearray()
    while True:
        byte, length = length % 128, length // 128
        encoded.append(byte | (0x80 if length else 0))
        if not length:
            break
    return b"\x30" + bytes(encoded) + body


async def _drain(reader: PacketSizeCap, total: int) -> bytes:
    out = b""
    while len(out) < total:
        out += await reader.read(1 if len(out) % 3 else 7)
    return out


@pytest.mark.parametrize("chunk", [1, 2, 5, 4096])
def test_packets_under_the_cap_pass_whole_in_any_chunking(chunk: int) -> None:
    stream = connect_packet("c", 30, MqttAuth("u", "p")) + _publish(100) + _publish(300) * 3
    reader = PacketSizeCap(_Bytes(stream, chunk), cap=1000)
    assert asyncio.run(_drain(reader, len(stream))) == stream


@pytest.mark.parametrize("chunk", [1, 3, 4096])
def test_a_packet_over_the_cap_is_refused_at_its_header(chunk: int) -> None:
    stream = _publish(10) + _publish(200_000)
    reader = PacketSizeCap(_Bytes(stream, chunk), cap=100_000)
    with pytest.raises(PacketTooLarge, match="200005 bytes exceeds"):
        asyncio.run(_drain(reader, len(stream)))
