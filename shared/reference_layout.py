"""The layout of a reference-outputs NPZ, checked from its ZIP directory and ``.npy`` headers.

An NPZ is a ZIP of ``.npy`` members. ``np.load`` inflates a member whole into an array of the
size its header declares, so a 778 KB upload can ask for 800 MB (a probe did); with
``allow_pickle`` it also unpickles object arrays. :func:`read_layout` reads only the ZIP's central
directory (each member's declared uncompressed size) and the first bytes of each member (its
``.npy`` header), and refuses before any array is loaded:

* a body that is not a ZIP;
* a member not named ``input:<tensor>.npy`` or ``output:<tensor>.npy``, or named twice;
* an uncompressed total above ``max_bytes`` (:data:`MAX_REFERENCE_BYTES`);
* a dtype that is not numeric (object, structured, void, strings, datetimes): no unpickling;
* a member whose size disagrees with its header (the allocation ``np.load`` would make).

:func:`check_reference` also matches the arrays against a model's tensors (names from the
directory first; then a leading case axis and the tensor's dims; its dtype; one case count for
all) and finally inflates each member in small chunks to verify its CRC, keeping nothing. The
controller runs it on an upload; the agent runs :func:`read_layout` and
:meth:`ReferenceLayout.cases` before ``np.load``.
Pure: the standard library, and numpy imported on first use (the agent loads it lazily).
"""

from __future__ import annotations

import io
import math
import re
import zipfile
import zlib
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy loads on first use, not at agent start (idle RSS)
    import numpy as np

MAX_REFERENCE_BYTES = 256 * 2**20
"""Largest uncompressed reference NPZ. A fixed contract rather than a controller setting: every
agent must accept what the controller accepts, and agents cannot learn a controller's setting.
Not a multiple of the model's size: a reference's size follows its tensors and case count, not
the weights (a 100 KB model can take 1024x1024 images). 256 MiB holds 4 cases of a 1080p RGB
FP32 input (24 MiB each) with outputs as large, is memory a Jetson can spare for one validation,
and the controller computes fewer cases for a model whose 4 would not fit."""

_KEY = re.compile(r"(input|output):(.+)")
_NUMERIC_KINDS = "biufc"
_CHUNK = 1 << 20
_LISTED = 5
_NAME_CHARS = 80


class ReferenceLayoutError(ValueError):
    """The NPZ is not a reference of the expected layout; the message says what is wrong."""


@dataclass(frozen=True)
class ArrayHeader:
    """One member as its ``.npy`` header declares it; nothing of its data has been read."""

    key: str
    shape: tuple[int, ...]
    dtype: str
    """numpy's name (``float32``), or its descriptor (``>f4``) when the byte order is foreign."""


@dataclass(frozen=True)
class ReferenceLayout:
    """The arrays of a reference NPZ by key (``input:<tensor>``), as their headers declare."""

    arrays: dict[str, ArrayHeader]

    def cases(self) -> int:
        """The case count every array has on its first axis; :class:`ReferenceLayoutError`
        when they disagree, one lacks the axis, or it is 0."""
        return _cases(self.arrays.values())


@dataclass(frozen=True)
class ExpectedTensor:
    """A model tensor a reference must hold: dims (positive int = fixed; anything else,
    e.g. a symbolic name, = dynamic, any size ≥ 1) and numpy dtype name (None: any numeric)."""

    name: str
    dims: tuple[int | str | None, ...]
    dtype: str | None


def read_layout(data: bytes, max_bytes: int = MAX_REFERENCE_BYTES) -> ReferenceLayout:
    """The arrays of NPZ ``data`` from its headers, or :class:`ReferenceLayoutError`."""
    return _read(data, max_bytes, wanted=None)


def check_reference(
    data: bytes,
    inputs: Sequence[ExpectedTensor],
    outputs: Sequence[ExpectedTensor],
    max_bytes: int = MAX_REFERENCE_BYTES,
) -> ReferenceLayout:
    """NPZ ``data`` as a reference of a model with ``inputs`` and ``outputs``: exactly their
    arrays, each with a leading case axis then the tensor's dims, its dtype, one case count,
    within ``max_bytes``, and intact; :class:`ReferenceLayoutError` saying the first misfit."""
    wanted = {f"input:{t.name}": t for t in inputs} | {f"output:{t.name}": t for t in outputs}
    layout = _read(data, max_bytes, wanted=wanted.keys())
    for key, tensor in wanted.items():
        header = layout.arrays[key]
        if tensor.dtype is not None and header.dtype != tensor.dtype:
            raise ReferenceLayoutError(
                f"array {_short(key)} has dtype {header.dtype}, model expects {tensor.dtype}"
            )
        if not _fits(header.shape, tensor.dims):
            raise ReferenceLayoutError(
                f"array {_short(key)} has shape {_shape(header.shape)}, model expects "
                f"{_expected_shape(tensor.dims)}: first axis = case (N), then the tensor's dims "
                "(dynamic ones any size ≥ 1)"
            )
    layout.cases()
    _check_data(data)
    return layout


def size_text(size: int) -> str:
    """``size`` for people: bytes under 1 MiB, else MiB."""
    if size < 2**20:
        return f"{size} bytes"
    mib = size / 2**20
    return f"{mib:.0f} MiB" if mib == int(mib) else f"{mib:.1f} MiB"


def _read(data: bytes, max_bytes: int, wanted: Collection[str] | None) -> ReferenceLayout:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        hint = " (a single .npy array)" if data.startswith(b"\x93NUMPY") else ""
        raise ReferenceLayoutError(
            f"not a ZIP/NPZ file{hint}: save the arrays with numpy.savez or numpy.savez_compressed"
        ) from exc
    with archive:
        members = archive.infolist()
        _check_names([m.filename for m in members], wanted)
        total = sum(m.file_size for m in members)
        if total > max_bytes:
            raise ReferenceLayoutError(
                f"uncompressed size {size_text(total)} exceeds the {size_text(max_bytes)} cap "
                "of reference outputs: use fewer cases"
            )
        return ReferenceLayout({h.key: h for h in (_header(archive, m) for m in members)})


def _check_names(names: list[str], wanted: Collection[str] | None) -> None:
    twice = sorted(n for n, count in Counter(names).items() if count > 1)
    if twice:
        raise ReferenceLayoutError(f"member(s) {_listing(twice)} appear more than once")
    keys = [n.removesuffix(".npy") if n.endswith(".npy") else n for n in names]
    if wanted is not None:
        missing = [k for k in wanted if k not in keys]
        extra = [k for k in keys if k not in wanted]
        if missing or extra:
            parts = [f"lacks {_listing(missing)}"] if missing else []
            parts += [f"has arrays the model has no tensor for: {_listing(extra)}"] if extra else []
            raise ReferenceLayoutError(
                f"reference NPZ {'; '.join(parts)}: arrays must be named input:<name> and "
                "output:<name> after the model's tensors, first axis = case"
            )
    unknown = [n for n in names if not n.endswith(".npy") or not _KEY.fullmatch(n[:-4])]
    if unknown:
        raise ReferenceLayoutError(
            f"unknown member(s) {_listing(unknown)}: a reference NPZ holds only "
            "input:<name>.npy and output:<name>.npy arrays (numpy.savez names them so)"
        )


def _check_data(data: bytes) -> None:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for member in archive.infolist():
            try:
                with archive.open(member) as stream:
                    while stream.read(_CHUNK):
                        pass
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
                raise ReferenceLayoutError(
                    f"member {_short(member.filename)} is corrupt ({_short(str(exc))}): "
                    "write the file again"
                ) from exc


def _header(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> ArrayHeader:
    from numpy.lib import format as npy

    key = member.filename[:-4]
    try:
        with archive.open(member) as stream:
            version = npy.read_magic(stream)
            if version == (1, 0):
                shape, _, dtype = npy.read_array_header_1_0(stream)
            elif version == (2, 0):
                shape, _, dtype = npy.read_array_header_2_0(stream)
            else:
                raise ValueError(f".npy format version {version[0]}.{version[1]} (1.0 or 2.0 only)")
            header_size = stream.tell()
    except (ValueError, TypeError, SyntaxError, EOFError, OSError, zipfile.BadZipFile) as exc:
        raise ReferenceLayoutError(
            f"member {_short(member.filename)} is not a .npy array ({_short(str(exc))})"
        ) from exc
    except (zlib.error, RuntimeError, NotImplementedError) as exc:  # encrypted, odd compression
        raise ReferenceLayoutError(
            f"member {_short(member.filename)} cannot be read ({_short(str(exc))})"
        ) from exc
    numeric = dtype.kind in _NUMERIC_KINDS and dtype.fields is None and dtype.subdtype is None
    if not numeric:
        raise ReferenceLayoutError(
            f"array {_short(key)} has dtype {_dtype_text(dtype)}: only numeric arrays (bool, "
            "int, uint, float, complex) are accepted"
        )
    if any(d < 0 for d in shape):
        raise ReferenceLayoutError(f"array {_short(key)} has a negative dimension {shape}")
    declared = header_size + math.prod(shape) * dtype.itemsize
    if declared != member.file_size:
        raise ReferenceLayoutError(
            f"member {_short(member.filename)} holds {member.file_size} bytes but its header "
            f"declares {declared} (shape {_shape(shape)} of {_dtype_text(dtype)}): the file is "
            "damaged or forged"
        )
    return ArrayHeader(key=key, shape=tuple(shape), dtype=_dtype_text(dtype))


def _cases(arrays: Iterable[ArrayHeader]) -> int:
    headers = list(arrays)
    if not headers:
        raise ReferenceLayoutError(
            "the NPZ holds no arrays: it needs input:<name> and output:<name> arrays"
        )
    flat = [h.key for h in headers if not h.shape]
    if flat:
        raise ReferenceLayoutError(
            f"array {_short(flat[0])} has no case axis: first axis = case, even for one case"
        )
    counts = sorted({h.shape[0] for h in headers})
    if len(counts) > 1:
        raise ReferenceLayoutError(
            f"arrays disagree on the number of cases (first axis): {', '.join(map(str, counts))}"
        )
    if counts[0] < 1:
        raise ReferenceLayoutError("the arrays hold no case (first axis 0): give at least one")
    return counts[0]


def _fits(shape: tuple[int, ...], dims: tuple[int | str | None, ...]) -> bool:
    if len(shape) != len(dims) + 1:
        return False
    return all(
        size == dim if isinstance(dim, int) and dim > 0 else size >= 1
        for size, dim in zip(shape[1:], dims, strict=True)
    )


def _dtype_text(dtype: np.dtype[Any]) -> str:
    return str(dtype.name if dtype.isnative else dtype.str)


def _shape(shape: Iterable[int]) -> str:
    return f"({','.join(str(d) for d in shape)})"


def _expected_shape(dims: Iterable[int | str | None]) -> str:
    shown = [str(d) if isinstance(d, int) and d > 0 else _short(str(d or "?")) for d in dims]
    return f"({','.join(['N', *shown])})"


def _short(name: str) -> str:
    return name if len(name) <= _NAME_CHARS else f"{name[:_NAME_CHARS]}…"


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(_short(n) for n in names[:_LISTED])
    return shown if len(names) <= _LISTED else f"{shown} and {len(names) - _LISTED} more"
