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
that object. What a client may register (each refused with the reason):

* an object directly under ``/dev/shm`` (``/name`` or ``name``), never one of the TensorRT host's
  own regions (``jfth-*``: the agent's in-flight inputs and outputs);
* a regular file, opened without following a symbolic link (``O_NOFOLLOW``), with one link;
* owned by the agent's own user or by a user in ``JETFLEET_SERVE_SHARED_MEMORY_UIDS``. HTTP over
  TCP carries no peer credentials (``SO_PEERCRED`` is for Unix sockets), so the agent cannot tie
  a region to the client that registered it: any client that reaches the agent's address may use,
  status and unregister every region. Who may register what is decided by the object's owner:
  a client user shares with the agent by being listed, and the agent never reads or writes an
  object of a user nobody listed;
* at most :data:`MAX_REGIONS` at a time (each holds one descriptor).

A region keeps its descriptor open and is read and written with ``pread``/``pwrite``, never
mapped: an object truncated after registration is a 400 naming it ("holds 0 of the 12,288
bytes"), where a mapping would have killed the agent with SIGBUS. One copy of a 600 KB frame
costs tens of microseconds, against an inference of milliseconds.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import InvalidInputError
from agent.trt_host.shm import ROOT as HOST_REGIONS

SHM_DIR = Path("/dev/shm")  # noqa: S108 (POSIX shared memory lives there, by name)
_KEY = re.compile(r"/?([A-Za-z0-9][A-Za-z0-9._-]{0,254})")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
MAX_REGIONS = 64
"""Regions registered at once (Triton keeps no limit; 19,978 regions took every descriptor)."""


class RegionError(InvalidInputError):
    """A register, unregister or use of a region that cannot be done (HTTP 400)."""


@dataclass
class Region:
    """One registered region: ``byte_size`` bytes at ``offset`` of the object open as ``fd``."""

    name: str
    key: str
    offset: int
    byte_size: int
    fd: int
    _io: threading.Lock = field(default_factory=threading.Lock)

    def read(self, start: int, size: int) -> bytearray:
        buffer = bytearray(size)
        with self._io:
            if self.fd < 0:
                raise RegionError(f"shared-memory region {self.name!r} was unregistered")
            got = os.preadv(self.fd, [buffer], start)
        if got != size:
            raise RegionError(self._shrunk(got, size))
        return buffer

    def write(self, start: int, data: bytes) -> None:
        with self._io:
            if self.fd < 0:
                raise RegionError(f"shared-memory region {self.name!r} was unregistered")
            have = os.fstat(self.fd).st_size
            if start + len(data) > have:
                raise RegionError(self._shrunk(max(0, have - start), len(data)))
            os.pwrite(self.fd, data, start)

    def _shrunk(self, got: int, size: int) -> str:
        return (
            f"shared-memory object {self.key!r} of region {self.name!r} holds {got:,} of the "
            f"{size:,} bytes asked: it was truncated after registration; register it again"
        )

    def close(self) -> None:
        with self._io:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1

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
    """The regions clients registered, by name; safe to use from any thread.

    ``owners``: the users (uids) besides the agent's own whose objects may be registered."""

    def __init__(self, shm_dir: Path = SHM_DIR, owners: Collection[int] = ()) -> None:
        self._dir = shm_dir
        self._owners = frozenset({os.geteuid(), *owners})
        self._lock = threading.Lock()
        self._regions: dict[str, Region] = {}

    def register(self, name: str, body: Any) -> None:
        """Open the object ``key`` for ``byte_size`` bytes at ``offset``; RegionError says why
        not."""
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
        if match.group(1).startswith(HOST_REGIONS):
            raise RegionError(
                f"key {key!r}: objects named {HOST_REGIONS}* are the agent's own TensorRT host "
                "regions and cannot be registered"
            )
        offset = _int(body.get("offset", 0), "offset")
        size = _int(body.get("byte_size"), "byte_size")
        if size == 0:
            raise RegionError("byte_size must be at least 1")
        with self._lock:
            if name in self._regions:
                raise RegionError(f"region {name!r} is already registered; unregister it first")
            if len(self._regions) >= MAX_REGIONS:
                raise RegionError(
                    f"{MAX_REGIONS} regions are registered, the most this agent keeps; "
                    "unregister one first"
                )
            fd = self._open(str(key), self._dir / match.group(1), offset + size)
            self._regions[name] = Region(name, str(key), offset, size, fd)

    def _open(self, key: str, path: Path, need: int) -> int:
        """A descriptor of ``path``, checked; RegionError says why not."""
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            raise RegionError(f"no shared-memory object {key!r} ({path})") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise RegionError(f"{key!r} is a symbolic link: refused") from None
            raise RegionError(f"cannot open {key!r}: {exc.strerror}") from exc
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                raise RegionError(f"{key!r} is not a shared-memory object (a plain file): refused")
            if info.st_uid not in self._owners:
                raise RegionError(
                    f"{key!r} belongs to uid {info.st_uid}, which this agent does not share "
                    f"memory with: create it as the agent's user, or list that uid in "
                    "JETFLEET_SERVE_SHARED_MEMORY_UIDS"
                )
            if need > info.st_size:
                raise RegionError(
                    f"offset + byte_size ({need}) is past the end of {key!r} ({info.st_size} bytes)"
                )
        except BaseException:
            os.close(fd)
            raise
        return fd

    def unregister(self, name: str | None = None) -> None:
        """Forget one region (or all); RegionError for an unknown one. A read or write that
        runs meanwhile finishes first."""
        with self._lock:
            if name is not None and name not in self._regions:
                raise RegionError(f"no shared-memory region {name!r} is registered")
            names = [name] if name is not None else list(self._regions)
            gone = [self._regions.pop(one) for one in names]
        for region in gone:
            region.close()

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

    def read(self, ref: TensorRef) -> bytearray:
        """A copy of the referenced bytes; RegionError when the object no longer holds them."""
        region, start = self._span(ref)
        return region.read(start, ref.byte_size)

    def write(self, ref: TensorRef, data: bytes) -> None:
        """Copy ``data`` to the start of the referenced span; RegionError when it does not fit."""
        if len(data) > ref.byte_size:
            raise RegionError(
                f"the output needs {len(data)} bytes, shared_memory_byte_size is {ref.byte_size}"
            )
        region, start = self._span(ref)
        region.write(start, data)

    def close(self) -> None:
        """Close every region (agent shutdown)."""
        self.unregister()
