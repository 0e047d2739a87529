"""Failed broker logins, counted per client address and per (address, user name): pure.

Every device login to the embedded broker costs a PBKDF2 hash (10,000 rounds of SHA-512): the
a security probe sent 274 wrong-password logins a second and kept both cores of the
controller busy. A key that failed too often in a window is *locked* for a while: its logins are
refused at once, without hashing. Two keys, so a credential guesser is slowed however it
spreads its tries:

* ``(address, user)``: :data:`PER_USER` failures in :data:`WINDOW_S`; a device with the right
  password from another address is not affected;
* ``address``: :data:`PER_ADDRESS` failures (a guesser trying many user names from one host).

A success clears its ``(address, user)`` key. Mosquitto has no such limit of its own; put it
behind a firewall rate limit where gateways reach it from untrusted networks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

WINDOW_S = 60.0
PER_USER = 5
PER_ADDRESS = 60
LOCK_S = 60.0
MAX_KEYS = 100_000
"""Keys kept at most; the oldest are forgotten first (a flood of addresses cannot grow it)."""


@dataclass
class _Failures:
    times: list[float] = field(default_factory=list)
    locked_until: float = 0.0


class LoginThrottle:
    """Thread-safe; ``clock`` is injectable for tests."""

    def __init__(
        self,
        per_user: int = PER_USER,
        per_address: int = PER_ADDRESS,
        window_s: float = WINDOW_S,
        lock_s: float = LOCK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limits = {"user": per_user, "address": per_address}
        self._window_s = window_s
        self._lock_s = lock_s
        self._clock = clock
        self._mutex = threading.Lock()
        self._keys: dict[tuple[str, ...], _Failures] = {}

    def locked(self, address: str | None, username: str) -> bool:
        """Whether a login of ``username`` from ``address`` is refused without checking."""
        now = self._clock()
        with self._mutex:
            return any(
                (entry := self._keys.get(key)) is not None and entry.locked_until > now
                for key in _keys(address, username)
            )

    def failed(self, address: str | None, username: str) -> bool:
        """Count a failed login; True when that locked one of its keys."""
        now = self._clock()
        locked = False
        with self._mutex:
            for key in _keys(address, username):
                entry = self._keys.pop(key, None) or _Failures()
                entry.times = [t for t in entry.times if now - t < self._window_s] + [now]
                if len(entry.times) >= self._limits[key[0]] and entry.locked_until <= now:
                    entry.locked_until = now + self._lock_s
                    locked = True
                self._keys[key] = entry  # re-inserted: the dict stays oldest-first
            while len(self._keys) > MAX_KEYS:
                del self._keys[next(iter(self._keys))]
        return locked

    def succeeded(self, address: str | None, username: str) -> None:
        with self._mutex:
            self._keys.pop(("user", address or "?", username), None)


def _keys(address: str | None, username: str) -> tuple[tuple[str, ...], ...]:
    where = address or "?"
    return (("user", where, username), ("address", where))
