"""Token buckets per client address for ``POST /api/v1/enroll``.

Each address may make ``burst`` attempts at once and then one every ``1/rate_per_s`` seconds;
an attempt over the limit learns how long to wait (HTTP 429, ``Retry-After``).

:func:`spend` is the pure decision (the clock is passed in). Two limiters apply it:

- :class:`SharedRateLimiter` keeps the buckets in the database (``jetfleet serve`` uses it), so
  the limit holds for the whole fleet of controller replicas behind a load balancer: a burst
  spread over three replicas is limited exactly as one sent to one replica. Its clock is the
  wall clock (``time.time``), the one clock replicas on different hosts share; a bucket stamped
  in the future by a replica whose clock runs ahead refills from that stamp, never earlier.
- :class:`RateLimiter` keeps them in this process's memory (one process, tests); buckets that
  have refilled are forgotten, so memory stays bounded by the addresses active in the last minute.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

DEFAULT_BURST = 10
DEFAULT_RATE_PER_S = 10 / 60
_PRUNE_ABOVE = 1024


@dataclass(frozen=True)
class Bucket:
    """Tokens left at time ``at`` (seconds of the limiter's clock)."""

    tokens: float
    at: float


@dataclass(frozen=True)
class Spent:
    """The bucket after one attempt, and how long to wait when it was refused (else None)."""

    bucket: Bucket
    wait_s: float | None


def spend(bucket: Bucket | None, now: float, burst: int, rate_per_s: float) -> Spent:
    """Refill ``bucket`` (None: a full one) up to ``now`` and spend one token if there is one."""
    if bucket is None:
        tokens, at = float(burst), now
    else:
        at = max(now, bucket.at)
        tokens = min(float(burst), bucket.tokens + (at - bucket.at) * rate_per_s)
    if tokens >= 1.0:
        return Spent(Bucket(tokens - 1.0, at), None)
    return Spent(Bucket(tokens, at), (1.0 - tokens) / rate_per_s)


def full_after_s(burst: int, rate_per_s: float) -> float:
    """Seconds an empty bucket takes to refill (a bucket untouched for longer can be forgotten)."""
    return burst / rate_per_s


def _check(burst: int, rate_per_s: float) -> None:
    if burst < 1 or rate_per_s <= 0:
        raise ValueError("a rate limit needs burst >= 1 and a positive rate")


class RateLimiter:
    """Token buckets keyed by client address in this process's memory; thread-safe."""

    def __init__(
        self,
        burst: int = DEFAULT_BURST,
        rate_per_s: float = DEFAULT_RATE_PER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check(burst, rate_per_s)
        self.burst = burst
        self.rate_per_s = rate_per_s
        self._clock = clock
        self._buckets: dict[str, Bucket] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float | None:
        """Spend one token of ``key``'s bucket: None when allowed, else seconds to wait."""
        with self._lock:
            now = self._clock()
            spent = spend(self._buckets.get(key), now, self.burst, self.rate_per_s)
            self._buckets[key] = spent.bucket
            if len(self._buckets) > _PRUNE_ABOVE:
                self._prune(now, keep=key)
            return spent.wait_s

    def _prune(self, now: float, keep: str) -> None:
        full = [
            k
            for k, b in self._buckets.items()
            if k != keep and b.tokens + (now - b.at) * self.rate_per_s >= self.burst
        ]
        for key in full:
            del self._buckets[key]


class BucketStore(Protocol):
    """Where shared buckets live (controller/db/rate_store.py): ``take`` locks ``key``'s bucket
    (``(tokens, at)``, None when there is none), stores what ``decide`` makes of it in the same
    transaction, and forgets buckets last touched before ``forget_before``."""

    def take(
        self,
        key: str,
        decide: Callable[[tuple[float, float] | None], tuple[float, float]],
        forget_before: float,
    ) -> None: ...


class SharedRateLimiter:
    """Token buckets keyed by client address in the database, shared by every replica."""

    def __init__(
        self,
        store: BucketStore,
        burst: int = DEFAULT_BURST,
        rate_per_s: float = DEFAULT_RATE_PER_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        _check(burst, rate_per_s)
        self.burst = burst
        self.rate_per_s = rate_per_s
        self._store = store
        self._clock = clock

    def take(self, key: str) -> float | None:
        """Spend one token of ``key``'s bucket: None when allowed, else seconds to wait."""
        now = self._clock()
        waits: list[float | None] = []

        def decide(stored: tuple[float, float] | None) -> tuple[float, float]:
            bucket = Bucket(*stored) if stored is not None else None
            spent = spend(bucket, now, self.burst, self.rate_per_s)
            waits[:] = [spent.wait_s]  # the last decision is the one stored (retries decide again)
            return spent.bucket.tokens, spent.bucket.at

        self._store.take(key, decide, forget_before=now - full_after_s(self.burst, self.rate_per_s))
        return waits[-1]


def retry_after_header(wait_s: float) -> str:
    """``Retry-After`` value: whole seconds, at least 1."""
    return str(max(1, math.ceil(wait_s)))
