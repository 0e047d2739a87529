"""The pure token-bucket decision behind the shared (database) enrolment rate limit."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controller.trust.enrolment_rate import Bucket, SharedRateLimiter, spend


class MemoryBuckets:
    """A BucketStore in a dict (the database one is tested in tests/integration/replicas/)."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[float, float]] = {}
        self.forget_before: float | None = None

    def take(
        self,
        key: str,
        decide: Callable[[tuple[float, float] | None], tuple[float, float]],
        forget_before: float,
    ) -> None:
        self.rows[key] = decide(self.rows.get(key))
        self.forget_before = forget_before


def test_a_new_address_starts_with_a_full_bucket() -> None:
    spent = spend(None, 100.0, burst=3, rate_per_s=1.0)
    assert spent == type(spent)(Bucket(2.0, 100.0), None)


def test_an_empty_bucket_names_the_wait_and_refills_with_time() -> None:
    empty = Bucket(0.0, 100.0)
    refused = spend(empty, 100.5, burst=3, rate_per_s=1.0)
    assert refused.wait_s == pytest.approx(0.5)
    assert spend(refused.bucket, 101.0, burst=3, rate_per_s=1.0).wait_s is None


def test_a_bucket_stamped_ahead_by_a_replica_with_a_fast_clock_does_not_refill_early() -> None:
    ahead = Bucket(0.0, 110.0)  # another replica's clock runs 10 s ahead
    spent = spend(ahead, 100.0, burst=3, rate_per_s=1.0)
    assert spent.wait_s == pytest.approx(1.0)
    assert spent.bucket.at == 110.0


def test_the_shared_limiter_spends_from_the_store_and_forgets_full_buckets() -> None:
    store = MemoryBuckets()
    now = [1000.0]
    limiter = SharedRateLimiter(store, burst=2, rate_per_s=0.5, clock=lambda: now[0])
    assert [limiter.take("10.0.0.1") for _ in range(2)] == [None, None]
    assert limiter.take("10.0.0.1") == pytest.approx(2.0)
    assert store.forget_before == pytest.approx(1000.0 - 4.0)
    now[0] += 2.0
    assert limiter.take("10.0.0.1") is None
