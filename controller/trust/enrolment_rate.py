"""A token bucket per client address for ``POST /api/v1/enroll`` (pure; the clock is passed in).

Each address may make ``burst`` attempts at once and then one every ``1/rate_per_s`` seconds;
an attempt over the limit learns how long to wait (HTTP 429, ``Retry-After``). Buckets that have
refilled are forgotten, so memory stays bounded by the addresses active in the last minute.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_BURST = 10
DEFAULT_RATE_PER_S = 10 / 60
_PRUNE_ABOVE = 1024


@dataclass
class _Bucket:
    tokens: float
    at: float


class RateLimiter:
    """Token buckets keyed by client address; thread-safe."""

    def __init__(
        self,
        burst: int = DEFAULT_BURST,
        rate_per_s: float = DEFAULT_RATE_PER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if burst < 1 or rate_per_s <= 0:
            raise ValueError("a rate limit needs burst >= 1 and a positive rate")
        self.burst = burst
        self.rate_per_s = rate_per_s
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float | None:
        """Spend one token of ``key``'s bucket: None when allowed, else seconds to wait."""
        with self._lock:
            now = self._clock()
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = _Bucket(float(self.burst), now)
                self._buckets[key] = bucket
            bucket.tokens = min(
                float(self.burst), bucket.tokens + (now - bucket.at) * self.rate_per_s
            )
            bucket.at = now
            if len(self._buckets) > _PRUNE_ABOVE:
                self._prune(now, keep=key)
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return None
            return (1.0 - bucket.tokens) / self.rate_per_s

    def _prune(self, now: float, keep: str) -> None:
        full = [
            k
            for k, b in self._buckets.items()
            if k != keep and b.tokens + (now - b.at) * self.rate_per_s >= self.burst
        ]
        for key in full:
            del self._buckets[key]


def retry_after_header(wait_s: float) -> str:
    """``Retry-After`` value: whole seconds, at least 1."""
    return str(max(1, math.ceil(wait_s)))
