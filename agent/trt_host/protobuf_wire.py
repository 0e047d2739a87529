"""The protobuf wire format, read and written by hand (pure; Python 3.8, standard library only).

Neither side of the TensorRT host may rely on the ``onnx`` package: JetPack 5's Python 3.8 has
none, and the agent does not install it. Two readers of ONNX files need the wire format: the
host's refit (:mod:`.onnx_weights`, initializers as arrays) and the agent's ORT builder
(:mod:`agent.engines.onnx_interface`, which rewrites ``graph.input`` and copies every other byte
unchanged). This module is the one copy of the format both use.
"""

from __future__ import annotations

from typing import Iterator, Tuple

VARINT, I64, LEN, I32 = 0, 1, 2, 5


class WireError(ValueError):
    """The bytes are not a protobuf message this reader can read."""


def varint(data: bytes | memoryview, pos: int) -> Tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise WireError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def fields(data: bytes | memoryview) -> Iterator[Tuple[int, int, int, int, int]]:
    """``(field number, wire type, start, payload start, end)`` of each field of one message.

    ``data[payload:end]`` is the payload: the varint's bytes, the 8 or 4 fixed bytes, or the
    length-delimited bytes; ``data[start:end]`` is the whole field, key included.
    """
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            payload = pos
            _, pos = varint(data, pos)
        elif wire == I64:
            payload, pos = pos, pos + 8
        elif wire == I32:
            payload, pos = pos, pos + 4
        elif wire == LEN:
            length, payload = varint(data, pos)
            pos = payload + length
        else:
            raise WireError("unsupported wire type %d in field %d" % (wire, number))
        if pos > len(data):
            raise WireError("field %d runs past the end of the message" % number)
        yield number, wire, start, payload, pos
