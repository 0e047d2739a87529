"""The enrolment rate limit: a token bucket per client address, on a fake clock."""

from __future__ import annotations

import pytest

from controller.trust.enrolment_rate import RateLimiter, retry_after_header


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_of_ten_then_one_every_six_seconds() -> None:
    clock = Clock()
    limiter = RateLimiter(burst=10, rate_per_s=10 / 60, clock=clock)
    assert [limiter.take("10.0.0.1") for _ in range(10)] == [None] * 10
    wait = limiter.take("10.0.0.1")
    assert wait == pytest.approx(6.0)
    assert retry_after_header(wait or 0) == "6"
    clock.now += 6.0
    assert limiter.take("10.0.0.1") is None
    assert limiter.take("10.0.0.1") is not None


def test_addresses_have_their_own_buckets() -> None:
    limiter = RateLimiter(burst=1, rate_per_s=1 / 60, clock=Clock())
    assert limiter.take("a") is None
    assert limiter.take("a") is not None
    assert limiter.take("b") is None


def test_refilled_buckets_are_forgotten_but_the_limit_holds() -> None:
    clock = Clock()
    limiter = RateLimiter(burst=2, rate_per_s=1.0, clock=clock)
    limiter.take("busy")
    limiter.take("busy")
    for i in range(2000):
        limiter.take(f"10.1.{i // 250}.{i % 250}")
        clock.now += 0.001
    assert len(limiter._buckets) < 2000
    assert limiter.take("busy") is None  # refilled by now (2 s later)


def test_retry_after_is_at_least_one_second() -> None:
    assert retry_after_header(0.01) == "1"
