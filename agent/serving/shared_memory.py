"""KServe v2 / Triton system shared memory: tensors passed through ``/dev/shm`` instead of HTTP.

A camera pipeline on the gateway writes its frame into a POSIX shared-memory object, registers
it once (``POST /v2/systemsharedmemory/region/<name>/register`` with ``key``, ``offset``,
``byte_size``), and then sends infer requests whose inputs say ``"parameters":
{"shared_memory_region": <name>, "shared_memory_byte_size": n[, "shared_memory_offset": k]}``
instead of carrying 600 KB of data; outputs asked with the same parameters are written into a
region and come back without data. This is Triton's system shared-memory extension (its
``docs/protocol/extension_shared_memory.md``), so Triton's clients
(``tritonclient.utils.shared_memory``) work unchanged.

Off unless the agent is started with ``JETFLEET_SERVE_SHARED_MEMORY=true`` (Triton:
``--allow-client-shm``): a registered region lets a local client make the agent read and write
that object. Keys name objects directly under ``/dev/shm`` (``/name`` or ``name``), nothing else.

A region is mapped once at registration; reads hand ONNX Runtime a view of the mapping (no
copy), writes copy the output into it. Unregistering a region that a running inference still
reads is refused (the mapping cannot close while a view of it is alive), never a crash.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.errors import InvalidInputError

SHM_DIR = Path("/dev/shm")  # noqa: S108 (POSIX shared memory lives there, by name)
_KEY = re.compile(r"/?([A-Za-z0-9][A-Za-z0-9._-]{0,254})")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class RegionError(InvalidInputError):
    """A register, unregister or use of a region that cannot be done (HTTP 400)."""


@dataclass
class Region:
    name: str
    key: str
    offset: int
    byte_size: int
    mapping: mmap.mmap

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key": self.key,
            "offset": self.offset,
            "byte_size": self.byte_size,
        }


def _int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RegionError(f"{what} must be a non-negative integer")
    return value


@dataclass(frozen=True)
class TensorRef:
    """Where a tensor lives: ``byte_size`` bytes at ``offset`` into region ``region``."""

    region: str
    byte_size: int
    offset: int = 0


def tensor_ref(raw: Any) -> TensorRef | None:
    """The shared-memory reference in a request input's or output's ``parameters``, if any."""
    params = raw.get("parameters") if isinstance(raw, dict) else None
    if not isinstance(params, dict):
        return None
    region, size = params.get("shared_memory_region"), params.get("shared_memory_byte_size")
    if region is None and size is None:
        return None
    if region is None or size is None:
        raise RegionError("shared_memory_region and shared_memory_byte_size must be given together")
    if not isinstance(region, str):
        raise RegionError("shared_memory_region must be a string")
    offset = params.get("shared_memory_offset", 0)
    return TensorRef(
        region,
        _int(size, "shared_memory_byte_size"),
        _int(offset, "shared_memory_offset"),
    )


class SharedMemoryRegions:
    """The regions clients registered, by name; safe to use from any thread."""

    def __init__(self, shm_dir: Path = SHM_DIR) -> None:
        self._dir = shm_dir
        self._lock = threading.Lock()
        self._regions: dict[str, Region] = {}

    def register(self, name: str, body: Any) -> None:
        """Map ``byte_size`` bytes at ``offset`` of the object ``key``; RegionError says why not."""
        if not _NAME.fullmatch(name):
            raise RegionError(f"region name {name!r}: use 1-128 characters of A-Z a-z 0-9 . _ -")
        if not isinstance(body, dict):
            raise RegionError("the register body must be an object with key, offset, byte_size")
        key = body.get("key")
        match = _KEY.fullmatch(key) if isinstance(key, str) else None
        if match is None:
            raise RegionError(
                f"key {key!r}: name a shared-memory object in {self._dir} ('/name' or 'name')"
            )
        offset = _int(body.get("offset", 0), "offset")
        size = _int(body.get("byte_size"), "byte_size")
        if size == 0:
            raise RegionError("byte_size must be at least 1")
        with self._lock:
            if name in self._regions:
                raise RegionError(f"region {name!r} is already registered; unregister it first")
            path = self._dir / match.group(1)
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                raise RegionError(f"no shared-memory object {key!r} ({path})") from None
            except OSError as exc:
                raise RegionError(f"cannot open {key!r}: {exc.strerror}") from exc
            try:
                have = os.fstat(fd).st_size
                if offset + size > have:
                    raise RegionError(
                        f"offset {offset} + byte_size {size} is past the end of {key!r} "
                        f"({have} bytes)"
                    )
                mapping = mmap.mmap(fd, offset + size)
            finally:
                os.close(fd)
            self._regions[name] = Region(name, str(key), offset, size, mapping)

    def unregister(self, name: str | None = None) -> None:
        """Forget one region (or all); RegionError for an unknown one or one still in use."""
        with self._lock:
            if name is not None and name not in self._regions:
                raise RegionError(f"no shared-memory region {name!r} is registered")
            names = [name] if name is not None else list(self._regions)
            for one in names:
                try:
                    self._regions[one].mapping.close()
                except BufferError:
                    raise RegionError(
                        f"region {one!r} is in use by a running inference; retry"
                    ) from None
                del self._regions[one]

    def status(self, name: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            if name is not None:
                if name not in self._regions:
                    raise RegionError(f"no shared-memory region {name!r} is registered")
                return [self._regions[name].status()]
            return [region.status() for region in self._regions.values()]

    def _span(self, ref: TensorRef) -> tuple[Region, int]:
        with self._lock:
            region = self._regions.get(ref.region)
        if region is None:
            raise RegionError(f"no shared-memory region {ref.region!r} is registered")
        if ref.offset + ref.byte_size > region.byte_size:
            raise RegionError(
                f"shared_memory_offset {ref.offset} + shared_memory_byte_size {ref.byte_size} "
                f"is past the end of region {ref.region!r} ({region.byte_size} bytes)"
            )
        return region, region.offset + ref.offset

    def read(self, ref: TensorRef) -> memoryview:
        """A view of the referenced bytes (no copy)."""
        region, start = self._span(ref)
        return memoryview(region.mapping)[start : start + ref.byte_size]

    def write(self, ref: TensorRef, data: bytes) -> None:
        """Copy ``data`` to the start of the referenced span; RegionError when it does not fit."""
        if len(data) > ref.byte_size:
            raise RegionError(
                f"the output needs {len(data)} bytes, shared_memory_byte_size is {ref.byte_size}"
            )
        region, start = self._span(ref)
        region.mapping[start : start + len(data)] = data

    def close(self) -> None:
        """Unmap every region (agent shutdown); one still in use stays mapped until freed."""
        with self._lock:
            for region in self._regions.values():
                with contextlib.suppress(BufferError):
                    region.mapping.close()
            self._regions.clear()
