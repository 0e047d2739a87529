"""HTTP ``Range`` header planning for artifact downloads (pure; RFC 9110 single ranges)."""

from __future__ import annotations

from dataclasses import dataclass

from controller.errors import RangeNotSatisfiable


@dataclass(frozen=True)
class ByteRange:
    """An inclusive byte range of a resource of ``size`` bytes."""

    start: int
    end: int
    size: int

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    def content_range(self) -> str:
        return f"bytes {self.start}-{self.end}/{self.size}"


def plan_range(header: str | None, size: int) -> ByteRange | None:
    """The range to send for ``header``; None means the whole resource (200).

    Syntax this server does not handle (other units, several ranges, garbage) is ignored, as the
    RFC allows, and the whole resource is sent. A well-formed range that lies wholly outside the
    resource raises :class:`RangeNotSatisfiable` (416).
    """
    if not header:
        return None
    unit, _, spec = header.strip().partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    if not dash or not (first.isdigit() or first == "") or not (last.isdigit() or last == ""):
        return None
    if first == "":
        if last == "":
            return None
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise RangeNotSatisfiable(f"range {header!r} is empty for {size} bytes", size)
        return ByteRange(max(0, size - suffix), size - 1, size)
    start = int(first)
    if last and int(last) < start:
        return None
    if start >= size:
        raise RangeNotSatisfiable(
            f"range {header!r} starts past the end of the artifact ({size} bytes)", size
        )
    end = int(last) if last else size - 1
    return ByteRange(start, min(end, size - 1), size)
