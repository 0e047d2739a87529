"""The cheap TensorRT plan check before any deserialisation (tensorrt-notes.md §1.4).

``trtexec --getPlanVersionOnly`` reads two little-endian u32 at the start of a plan (the magic tag
``0x74727466`` and serialization version 0) and the TensorRT version as four bytes at offset 24,
for plans from TensorRT >= 8.6. NVIDIA marks the layout best-effort, so the check refuses only
what is certainly wrong: no plan at all, or a plan of another TensorRT version. Pure.
"""

from __future__ import annotations

import struct

PLAN_FILE_TAG = 0x74727466
VERSION_OFFSET = 24


class PlanMismatch(ValueError):
    """The bytes are not a plan this TensorRT can load; the message says what to do."""


def plan_trt_version(blob: bytes) -> tuple[int, int, int, int] | None:
    """(major, minor, patch, build) from a plan's header; None when it is not a known plan."""
    if len(blob) < VERSION_OFFSET + 4:
        return None
    tag, serialization = struct.unpack_from("<II", blob, 0)
    if tag != PLAN_FILE_TAG or serialization != 0:
        return None
    major, minor, patch, build = blob[VERSION_OFFSET : VERSION_OFFSET + 4]
    return major, minor, patch, build


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def check_plan(blob: bytes, tensorrt_version: str) -> tuple[int, int, int, int]:
    """The plan's version when it matches ``tensorrt_version``; PlanMismatch otherwise.

    A shorter installed version (``10.3.0``) matches on the parts it has.
    """
    found = plan_trt_version(blob)
    if found is None:
        raise PlanMismatch(
            "not a TensorRT plan (no plan magic tag or an unknown serialization version): "
            "the engine file is corrupt or from another runtime; it will be rebuilt"
        )
    wanted = _version_tuple(tensorrt_version)
    if found[: len(wanted)] != wanted[:4]:
        shown = ".".join(map(str, found))
        raise PlanMismatch(
            f"plan built by TensorRT {shown}, this device runs TensorRT {tensorrt_version}: "
            "rebuild the engine for this TensorRT"
        )
    return found
