"""Frames between the agent and its TensorRT host: versions, truncation, oversized frames."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace

import pytest

from agent.errors import ModelLoadError
from agent.runtimes.host import TrtHost
from agent.trt_host import protocol as p
from agent.trt_host import shm
from tests.integration.trt_host.conftest import FAST


@pytest.fixture
def pair() -> Iterator[tuple[p.Channel, socket.socket]]:
    ours, theirs = socket.socketpair()
    ours.settimeout(10)  # a recv that should fail at once must not hang the run instead
    yield p.Channel(ours), theirs
    ours.close()
    theirs.close()


def test_a_frame_round_trips_with_its_header_and_payload(pair) -> None:
    channel, peer = pair
    peer.sendall(p.encode(p.Message(p.INFER, 7, {"model": 1, "shape": [1, 3]}, b"\x00\x01")))
    got = channel.recv()
    assert (got.kind, got.id, got.body, got.payload) == (
        "infer",
        7,
        {"model": 1, "shape": [1, 3]},
        b"\x00\x01",
    )


def test_a_newer_minor_version_is_read(pair) -> None:
    channel, peer = pair
    peer.sendall(p.encode(p.Message(p.PING, 1, {"new_field": True}), minor=p.MINOR + 5))
    assert channel.recv().body == {"new_field": True}


def test_a_peer_of_another_major_version_is_refused_before_its_header(pair) -> None:
    channel, peer = pair
    peer.sendall(p.encode(p.Message(p.PING, 1), major=p.MAJOR + 1))
    with pytest.raises(p.VersionMismatch, match=r"protocol 2\.1, this side speaks 1\.1"):
        channel.recv()


def test_a_stream_that_ends_inside_a_frame_is_truncated_and_between_frames_closed(pair) -> None:
    channel, peer = pair
    frame = p.encode(p.Message(p.PING, 1, {"x": "y" * 100}))
    peer.sendall(frame + frame[:30])
    peer.shutdown(socket.SHUT_WR)
    assert channel.recv().kind == p.PING
    with pytest.raises(p.Truncated, match="inside a frame"):
        channel.recv()
    ours, theirs = socket.socketpair()
    theirs.close()
    with pytest.raises(p.PeerClosed):
        p.Channel(ours).recv()
    ours.close()


@pytest.mark.parametrize(("header", "payload"), [(p.MAX_HEADER + 1, 0), (10, p.MAX_PAYLOAD + 1)])
def test_oversized_frames_are_refused_from_their_prefix(pair, header: int, payload: int) -> None:
    channel, peer = pair
    peer.sendall(p.PREFIX.pack(p.MAGIC, p.MAJOR, p.MINOR, 0, header, payload))  # nothing after
    with pytest.raises(p.ProtocolError, match="over the"):
        channel.recv()


def test_oversized_frames_are_not_sent() -> None:
    with pytest.raises(p.ProtocolError, match="payload of"):
        p.encode(p.Message(p.PING, 1, {}, b"\x00" * (p.MAX_PAYLOAD + 1)))
    with pytest.raises(p.ProtocolError, match="header of"):
        p.encode(p.Message(p.PING, 1, {"x": "y" * p.MAX_HEADER}))


def test_bytes_that_are_not_a_frame_are_refused(pair) -> None:
    channel, peer = pair
    peer.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    with pytest.raises(p.ProtocolError, match="not a Jetfleet TensorRT host frame"):
        channel.recv()


def test_the_agent_refuses_a_host_of_another_protocol_version() -> None:
    host = TrtHost(replace(FAST, module="tests.integration.trt_host.peer_v2"))
    with pytest.raises(ModelLoadError, match=r"protocol 2\.0, this side speaks 1\.1"):
        host.start()


def test_the_host_refuses_an_agent_of_another_protocol_version_and_exits() -> None:
    ours, theirs = socket.socketpair()
    ours.settimeout(30)
    prefix = shm.host_prefix(os.getpid(), "framing")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent.trt_host", "--fd", str(theirs.fileno()),
         "--backend", "onnxruntime", "--shm-prefix", prefix],
        pass_fds=(theirs.fileno(),), stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    theirs.close()
    channel = p.Channel(ours)
    assert channel.recv().kind == p.HELLO
    ours.sendall(p.encode(p.Message(p.PING, 1), major=2))
    _, stderr = proc.communicate(timeout=30)
    ours.close()
    assert proc.returncode == 2
    assert "peer speaks TensorRT host protocol 2.1, this side speaks 1.1" in stderr


def test_a_request_kind_the_host_does_not_know_is_answered_and_the_host_keeps_serving(
    host: TrtHost,
) -> None:
    proc = host._current()
    reply = proc.request("defragment", {}, 30)
    assert (reply.kind, reply.body["error"]) == (p.ERROR, p.UNKNOWN_KIND)
    assert "defragment" in reply.body["message"]
    assert host.ping()["models"] == 0
