"""Filling a (small) file system to its last free byte: the "state directory full" fault."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def fill_to_last_byte(filler: Path) -> Path:
    """Write ``filler`` until its file system has no free byte left (ENOSPC at 1 MiB, then 4 KiB,
    then 1 byte); returns ``filler``, whose removal gives the space back."""
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for size in (1 << 20, 4096, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return filler
