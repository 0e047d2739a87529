"""The agent <-> TensorRT host wire format: length-prefixed, versioned frames over a socket.

Every frame is a fixed 16-byte prefix, a JSON header and an optional raw payload::

    magic "JFTH" | major u8 | minor u8 | reserved u16 | header length u32 | payload length u32
    header: {"kind": ..., "id": ..., "body": {...}}   (UTF-8 JSON)
    payload: raw bytes (unused by tensors, which travel through /dev/shm, see ``shm``)

The prefix layout never changes between versions, so a peer of another major version is refused
with a clear error (:class:`VersionMismatch`) before its header is read; minor versions only add
message kinds or body fields, which a receiver ignores when it does not know them. Oversized
frames are refused on both sides before anything is allocated; a stream closed inside a frame is
:class:`Truncated`, at a frame boundary :class:`PeerClosed`.

Requests (agent -> host) carry an ``id``; the host answers each with one ``ok`` or ``error``
frame of the same id, after any number of ``progress`` frames (builds, loads). The host speaks
first: one ``hello`` frame with its pid, Python, backend and backend version.

Runs in the host under JetPack's Python (3.8 on JetPack 5): Python 3.8 syntax, standard library
only, no ``agent`` module outside ``agent.trt_host``.

Concurrency: :meth:`Channel.send` may be called from several threads (one lock per channel);
:meth:`Channel.recv` from one reader thread only.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
from typing import Any

MAGIC = b"JFTH"
MAJOR = 1
MINOR = 1
VERSION = f"{MAJOR}.{MINOR}"
PREFIX = struct.Struct("!4sBBHII")
"""magic, major, minor, reserved, header length, payload length (16 bytes, network order)."""

MAX_HEADER = 1 << 20
"""Largest JSON header either side accepts (1 MiB): bodies are descriptors, never tensors."""
MAX_PAYLOAD = 64 << 20
"""Largest raw payload either side accepts (64 MiB)."""

# Requests (agent -> host).
PING = "ping"
LOAD = "load"
IO = "io"
INFER = "infer"
UNLOAD = "unload"
BUILD = "build"
SHUTDOWN = "shutdown"
REFIT = "refit"  # 1.1: new weights into a loaded refittable model
PROFILE = "profile"  # 1.1: per-layer times of a loaded model
REQUESTS = (PING, LOAD, IO, INFER, UNLOAD, BUILD, SHUTDOWN, REFIT, PROFILE)

# Host -> agent.
HELLO = "hello"
OK = "ok"
ERROR = "error"
PROGRESS = "progress"

# ``error`` frames name one of these in body["error"]; the agent maps them to its own errors.
LOAD_FAILED = "load_failed"
INFER_FAILED = "infer_failed"
BUILD_FAILED = "build_failed"
REFIT_FAILED = "refit_failed"
PROFILE_FAILED = "profile_failed"
UNSUPPORTED = "unsupported"  # the host's backend cannot do this (e.g. refit on the CPU backend)
BAD_REQUEST = "bad_request"
UNKNOWN_KIND = "unknown_kind"


class ProtocolError(Exception):
    """The peer sent something this side cannot read; the stream cannot be trusted any more."""


class VersionMismatch(ProtocolError):
    """The peer speaks another major version of the protocol."""


class Truncated(ProtocolError):
    """The stream ended inside a frame."""


class PeerClosed(ProtocolError):
    """The stream ended cleanly between two frames (the peer closed or died)."""


class Message:
    """One frame: ``kind``, the request ``id`` it belongs to, a JSON ``body``, a raw payload."""

    __slots__ = ("body", "id", "kind", "payload")

    def __init__(
        self, kind: str, id: int = 0, body: dict[str, Any] | None = None, payload: bytes = b""
    ) -> None:
        self.kind = kind
        self.id = id
        self.body: dict[str, Any] = body if body is not None else {}
        self.payload = payload

    def __repr__(self) -> str:
        return (
            f"Message({self.kind!r}, id={self.id}, body={self.body!r}, {len(self.payload)} bytes)"
        )


def encode(message: Message, major: int = MAJOR, minor: int = MINOR) -> bytes:
    """The frame's bytes; ProtocolError when the header or payload is over the limit."""
    header = json.dumps(
        {"kind": message.kind, "id": message.id, "body": message.body}, separators=(",", ":")
    ).encode("utf-8")
    if len(header) > MAX_HEADER:
        raise ProtocolError(f"header of {len(header)} bytes is over the {MAX_HEADER} limit")
    if len(message.payload) > MAX_PAYLOAD:
        raise ProtocolError(
            f"payload of {len(message.payload)} bytes is over the {MAX_PAYLOAD} limit"
        )
    prefix = PREFIX.pack(MAGIC, major, minor, 0, len(header), len(message.payload))
    return prefix + header + message.payload


def check_prefix(prefix: bytes) -> tuple[int, int]:
    """``(header length, payload length)`` of a frame prefix, or why it cannot be read."""
    magic, major, minor, _reserved, header_len, payload_len = PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise ProtocolError(
            f"not a Jetfleet TensorRT host frame (starts with {magic!r}, expected {MAGIC!r})"
        )
    if major != MAJOR:
        raise VersionMismatch(
            f"peer speaks TensorRT host protocol {major}.{minor}, this side speaks {VERSION}: "
            "the agent and its TensorRT host must come from the same Jetfleet release"
        )
    if header_len > MAX_HEADER:
        raise ProtocolError(f"header of {header_len} bytes is over the {MAX_HEADER} limit")
    if payload_len > MAX_PAYLOAD:
        raise ProtocolError(f"payload of {payload_len} bytes is over the {MAX_PAYLOAD} limit")
    return header_len, payload_len


def decode_header(raw: bytes, payload: bytes = b"") -> Message:
    """The message in a frame's header bytes; ProtocolError when it is not one."""
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"frame header is not JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise ProtocolError("frame header is not a JSON object")
    kind, ident, body = header.get("kind"), header.get("id", 0), header.get("body", {})
    if not isinstance(kind, str) or not isinstance(ident, int) or not isinstance(body, dict):
        raise ProtocolError("frame header needs a string kind, an integer id and an object body")
    return Message(kind, ident, body, payload)


class Channel:
    """Frames over one connected stream socket (a socketpair end or a Unix socket)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()

    def send(self, message: Message) -> None:
        """Send one frame whole (OSError when the peer is gone)."""
        data = encode(message)
        with self._send_lock:
            self.sock.sendall(data)

    def recv(self) -> Message:
        """The next frame; PeerClosed at a clean end, Truncated inside a frame."""
        prefix = self._read(PREFIX.size, at_boundary=True)
        header_len, payload_len = check_prefix(prefix)
        header = self._read(header_len, at_boundary=False)
        payload = self._read(payload_len, at_boundary=False) if payload_len else b""
        return decode_header(header, payload)

    def _read(self, size: int, at_boundary: bool) -> bytes:
        buffer = bytearray(size)
        view = memoryview(buffer)
        got = 0
        while got < size:
            n = self.sock.recv_into(view[got:], size - got)
            if n == 0:
                if got == 0 and at_boundary:
                    raise PeerClosed("peer closed the connection")
                raise Truncated(f"stream ended inside a frame ({got} of {size} bytes)")
            got += n
        return bytes(buffer)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
