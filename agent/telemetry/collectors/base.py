"""The one seam every collector sits behind: ``collect() -> Readings``."""

from __future__ import annotations

from typing import Protocol, TypeVar


class Readings(Protocol):
    """What every collector answers: its values, or ``available=False`` and the reason why."""

    @property
    def available(self) -> bool: ...

    @property
    def reason(self) -> str | None: ...


R_co = TypeVar("R_co", bound=Readings, covariant=True)


class Collector(Protocol[R_co]):
    """A source of readings; ``collect`` never raises for an absent source, it says why."""

    def collect(self) -> R_co: ...

    def close(self) -> None: ...
