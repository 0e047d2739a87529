"""The TensorRT version in a plan's header, where that layout is documented; pure.

``trtexec --getPlanVersionOnly`` reads two little-endian u32 at the start of a plan (the magic
tag ``0x74727466`` and serialization version 0) and the TensorRT version as four bytes at offset
24, for plans from TensorRT >= 8.6 (docs/tensorrt.md#reading-a-plans-version).
For older plans, or bytes without the tag, the version is "unknown": the check then refuses
nothing and leaves the verdict to ``deserialize_cuda_engine``.
"""

from __future__ import annotations

import struct
from typing import Optional, Tuple

PLAN_FILE_TAG = 0x74727466
VERSION_OFFSET = 24
UNKNOWN = "unknown"


class PlanMismatch(ValueError):
    """A plan certainly built by another TensorRT; the message says what to do."""


def plan_version(blob: bytes) -> Optional[Tuple[int, int, int, int]]:
    """(major, minor, patch, build) of a >= 8.6 plan; None when the header does not say."""
    if len(blob) < VERSION_OFFSET + 4:
        return None
    tag, serialization = struct.unpack_from("<II", blob, 0)
    if tag != PLAN_FILE_TAG or serialization != 0:
        return None
    major, minor, patch, build = bytearray(blob[VERSION_OFFSET : VERSION_OFFSET + 4])
    if (major, minor) < (8, 6):
        return None
    return major, minor, patch, build


def describe(blob: bytes) -> str:
    """``"8.6.1.6"`` or ``"unknown"``."""
    found = plan_version(blob)
    return UNKNOWN if found is None else ".".join(str(p) for p in found)


def check(blob: bytes, version: Tuple[int, int, int]) -> None:
    """PlanMismatch when the header names another release than ``version`` (major.minor.patch)."""
    found = plan_version(blob)
    if found is not None and tuple(found[:3]) != tuple(version[:3]):
        raise PlanMismatch(
            "plan built by TensorRT %s, this device runs TensorRT %s: rebuild the engine"
            % (".".join(map(str, found)), ".".join(map(str, version)))
        )
