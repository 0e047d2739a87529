"""One log line per key and time window, so a misbehaving device cannot flood the log.

Pure apart from the injected clock: :meth:`LogThrottle.admit` says whether a line for ``key``
may be written now and how many were held back since the last one. The number of keys is
bounded (the oldest is forgotten first), so a stream of invented device ids costs no memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

DEFAULT_WINDOW_S = 300.0
DEFAULT_MAX_KEYS = 10_000


@dataclass
class _Entry:
    logged_at: float
    held_back: int = 0


class LogThrottle:
    """Admits the first line per key, then at most one per ``window_s``; not thread-safe."""

    def __init__(
        self,
        window_s: float = DEFAULT_WINDOW_S,
        max_keys: int = DEFAULT_MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._window = window_s
        self._max_keys = max_keys
        self._clock = clock
        self._entries: dict[Hashable, _Entry] = {}

    def admit(self, key: Hashable) -> int | None:
        """None: hold this line back. Otherwise write it, noting the returned count of lines
        held back for ``key`` since the last one written."""
        now = self._clock()
        entry = self._entries.get(key)
        if entry is not None and now - entry.logged_at < self._window:
            entry.held_back += 1
            return None
        held_back = entry.held_back if entry is not None else 0
        self._entries.pop(key, None)
        while len(self._entries) >= self._max_keys:
            del self._entries[next(iter(self._entries))]
        self._entries[key] = _Entry(logged_at=now)
        return held_back
