"""NPZ files for the reference-outputs tests, built in code: honest ones, and forged ones whose
``.npy`` headers, sizes or members lie, written member by member so that none is ever allocated."""

from __future__ import annotations

import io
import warnings
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.lib import format as npy

_ZEROS = bytes(1 << 20)


def npz(arrays: dict[str, np.ndarray]) -> bytes:
    """``np.savez`` of ``arrays`` (object arrays pickled, as numpy does by default)."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


@dataclass(frozen=True)
class Member:
    """One ``.npy`` member: its header says ``shape`` of ``descr``; ``data_bytes`` zero bytes
    follow (None: as many as the header declares)."""

    name: str
    shape: tuple[int, ...]
    descr: str | list[tuple[str, str]] = "<f4"
    data_bytes: int | None = None


def forged_npz(members: Iterable[Member], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """An NPZ of ``members`` whose data is zeros, streamed in 1 MiB chunks: a 300 MB member
    costs 1 MiB of memory here and compresses to about 300 KB."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zipfile's "Duplicate name"
        with zipfile.ZipFile(buffer, "w", compression) as archive:
            for m in members:
                header = {"descr": m.descr, "fortran_order": False, "shape": m.shape}
                size = m.data_bytes
                if size is None:
                    itemsize = np.dtype(m.descr).itemsize
                    size = int(np.prod(m.shape, dtype=np.int64)) * itemsize
                with archive.open(m.name, "w", force_zip64=True) as stream:
                    npy.write_array_header_1_0(stream, header)
                    while size > 0:
                        stream.write(_ZEROS[: min(size, len(_ZEROS))])
                        size -= len(_ZEROS)
    return buffer.getvalue()


def classifier_bomb(cases: int = 25_000, classes: int = 10) -> bytes:
    """A reference NPZ for :func:`controller.demo.sample_models.classifier` right in every name,
    shape and dtype, but of ``cases`` cases: 25,000 expand to 307 MB from about 300 KB."""
    return forged_npz(
        [
            Member("input:image.npy", (cases, 1, 3, 32, 32)),
            Member("output:probabilities.npy", (cases, 1, classes)),
        ]
    )


class Detonator:
    """Unpickling one of these calls :func:`detonate`: proof that something unpickled it."""

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return detonate, ()


DETONATIONS: list[str] = []


def detonate() -> None:
    DETONATIONS.append("unpickled")
