"""Tensors through /dev/shm: the agent writes inputs where the host reads them in place.

A :class:`Region` is one file in /dev/shm mapped by both processes. The agent writes a request's
inputs into its input region and the host hands numpy views of that region to the runtime (no
copy); the host writes outputs into its output region, which the agent maps and reads. Frames only
carry descriptors (:func:`place`): name, dtype, shape and offset of each tensor. Regions are
reused across requests and replaced by a larger one only when a request does not fit.

Names: every region of one host starts with that host's prefix,
``jfth-<agent pid>-<host tag>-``, whoever created it; the tag ends in random hex, so a local user
cannot create a host's names before it does, and a name taken anyway gets a random suffix
(:meth:`Region.create`). So whichever side survives a ``kill -9``
unlinks them all (:func:`unlink_prefix`): the agent when its host dies, the host when its agent's
socket closes; :func:`sweep_orphans` removes the regions of agents that are no longer running
(both sides killed). The regions are plain files opened by name, not
``multiprocessing.shared_memory`` (whose resource tracker unlinks a region when a process that only
attached to it exits, on Python 3.8 to 3.12).

Runs in the host under JetPack's Python: Python 3.8 syntax, standard library and numpy only.
Concurrency: a region is used by one request at a time (the agent's per-model lock).
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import re
import secrets
import stat
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a tensor is touched: the agent's HTTP side needs ROOT only
    import numpy as np

SHM_DIR = "/dev/shm"  # noqa: S108 - named regions are the point; 0600, O_EXCL
ROOT = "jfth-"
"""Every region's name starts with this, then the agent's pid."""
ALIGN = 64
"""Tensor offsets are multiples of this (cache lines; what TensorRT bindings like)."""
MIN_SIZE = 64 << 10
CREATE_ATTEMPTS = 8
"""Names tried for a new region before giving up (the first, then random suffixes)."""

DTYPES = frozenset(
    (
        "bool",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "float32",
        "float64",
    )
)
"""numpy dtype names a descriptor may name: no object or structured dtypes from the peer."""

_NAME = re.compile(r"^jfth-[0-9]+-[A-Za-z0-9._-]+$")


class RegionError(Exception):
    """A region or a tensor descriptor is unusable (bad name, out of bounds, unknown dtype)."""


def host_prefix(agent_pid: int, tag: str) -> str:
    """The prefix of every region one host's pair uses (``tag``: letters, digits, ``.-_``)."""
    prefix = f"{ROOT}{agent_pid}-{tag}-"
    if not _NAME.match(prefix + "x"):
        raise RegionError(f"bad region prefix {prefix!r}")
    return prefix


def rounded_size(need: int) -> int:
    """The size of a region that holds ``need`` bytes: a power of two, at least 64 KiB."""
    size = MIN_SIZE
    while size < need:
        size *= 2
    return size


class Region:
    """One mapped /dev/shm file: ``create`` makes it (its creator unlinks it); ``attach``."""

    def __init__(self, name: str, size: int, buffer: mmap.mmap) -> None:
        self.name = name
        self.size = size
        self.buffer = buffer

    @staticmethod
    def _path(name: str) -> str:
        if not _NAME.match(name):
            raise RegionError(f"bad region name {name!r}")
        return os.path.join(SHM_DIR, name)

    @classmethod
    def create(cls, name: str, size: int) -> Region:
        """A new region named ``name``, or ``name.<random>`` when another process already made
        a file of that name (a local user who saw the prefix in /dev/shm)."""
        for attempt in range(CREATE_ATTEMPTS):
            candidate = name if attempt == 0 else f"{name}.{secrets.token_hex(4)}"
            path = cls._path(candidate)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except FileExistsError:
                continue
            try:
                os.ftruncate(fd, size)
                buffer = mmap.mmap(fd, size)
            except BaseException:
                os.unlink(path)
                raise
            finally:
                os.close(fd)
            return cls(candidate, size, buffer)
        raise RegionError(f"cannot create region {name}: {CREATE_ATTEMPTS} names taken")

    @classmethod
    def attach(cls, name: str, size: int) -> Region:
        """The peer's region ``name``: a plain file of this user, not a link to one."""
        try:
            fd = os.open(cls._path(name), os.O_RDWR | os.O_NOFOLLOW)
        except OSError as exc:
            raise RegionError(f"cannot open region {name}: {exc}") from exc
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                raise RegionError(f"region {name} is not a file of this user: refused")
            actual = info.st_size
            if actual < size:
                raise RegionError(f"region {name} has {actual} bytes, {size} announced")
            buffer = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        return cls(name, size, buffer)

    def view(self, descriptor: dict[str, Any]) -> np.ndarray:
        """The tensor ``descriptor`` names, as a numpy view of this region (no copy)."""
        dtype_name = descriptor.get("dtype")
        shape = descriptor.get("shape")
        offset = descriptor.get("offset")
        if dtype_name not in DTYPES:
            raise RegionError(f"tensor dtype {dtype_name!r} is not one this host serves")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise RegionError(f"bad tensor shape {shape!r}")
        if not isinstance(offset, int) or offset < 0 or offset % ALIGN:
            raise RegionError(f"bad tensor offset {offset!r}")
        import numpy as np

        dtype = np.dtype(str(dtype_name))
        nbytes = math.prod(shape) * dtype.itemsize  # Python ints: no overflow, no numpy call
        if offset + nbytes > self.size:
            raise RegionError(
                f"tensor of {nbytes} bytes at {offset} is past the end of {self.name}"
            )
        view: np.ndarray = np.ndarray(tuple(shape), dtype=dtype, buffer=self.buffer, offset=offset)
        return view

    def close(self) -> None:
        """Unmap; a view still alive keeps the mapping until it is collected."""
        with contextlib.suppress(BufferError, ValueError):
            self.buffer.close()

    def unlink(self) -> None:
        with contextlib.suppress(OSError):  # gone already, or not ours to remove
            os.unlink(self._path(self.name))


def place(arrays: dict[str, np.ndarray]) -> tuple[list[dict[str, Any]], int]:
    """Descriptors laying ``arrays`` out one after the other (aligned), and the bytes needed."""
    descriptors = []
    offset = 0
    for name, array in arrays.items():
        dtype = array.dtype.name  # a property that builds the string: read it once
        if dtype not in DTYPES:
            raise RegionError(f"tensor {name!r} has dtype {dtype}, not served")
        descriptors.append(
            {"name": name, "dtype": dtype, "shape": list(array.shape), "offset": offset}
        )
        offset += -(-array.nbytes // ALIGN) * ALIGN
    return descriptors, offset


def write(region: Region, arrays: dict[str, np.ndarray], descriptors: list[dict[str, Any]]) -> None:
    """Copy ``arrays`` into ``region`` where ``descriptors`` (from :func:`place`) put them."""
    import numpy as np

    for descriptor in descriptors:
        np.copyto(region.view(descriptor), arrays[descriptor["name"]], casting="no")


def read(region: Region, descriptors: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Views of the tensors ``descriptors`` name (valid until the region is reused)."""
    out = {}
    for descriptor in descriptors:
        name = descriptor.get("name")
        if not isinstance(name, str):
            raise RegionError(f"bad tensor name {name!r}")
        out[name] = region.view(descriptor)
    return out


def unlink_prefix(prefix: str) -> list[str]:
    """Unlink every region whose name starts with ``prefix``; the names removed. A file this
    user may not remove (another user's, made to look like ours) is left where it is."""
    if not prefix.startswith(ROOT):
        raise RegionError(f"refusing to unlink outside {ROOT}*: {prefix!r}")
    removed = []
    for name in sorted(os.listdir(SHM_DIR)):
        if name.startswith(prefix):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(SHM_DIR, name))
                removed.append(name)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_orphans() -> list[str]:
    """Unlink the regions of agents that are no longer running (a ``kill -9`` of both sides)."""
    removed = []
    for name in sorted(os.listdir(SHM_DIR)):
        if not _NAME.match(name):
            continue
        pid = int(name.split("-")[1])
        if pid != os.getpid() and not _running(pid):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(SHM_DIR, name))
                removed.append(name)
    return removed
