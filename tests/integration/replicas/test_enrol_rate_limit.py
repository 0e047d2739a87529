"""The enrolment rate limit holds across replicas: it is kept in the database, so a burst spread
over two replicas behind a load balancer is limited exactly as one sent to a single replica."""

from __future__ import annotations

import httpx

from controller.trust.enrolment_rate import DEFAULT_BURST
from tests.integration.replicas.conftest import Cluster


def test_a_burst_split_over_two_replicas_is_limited_as_one(cluster: Cluster) -> None:
    a, b = cluster.start(2)
    answers: list[tuple[str, httpx.Response]] = []
    with httpx.Client(timeout=30) as client:
        for attempt in range(DEFAULT_BURST + 4):
            replica = (a, b)[attempt % 2]  # a round-robin load balancer
            body = {"token": f"guess-{attempt}", "device_id": f"gw-{attempt}"}
            answers.append((replica.url, client.post(f"{replica.url}/api/v1/enroll", json=body)))
    codes = [r.status_code for _, r in answers]
    # the first DEFAULT_BURST guesses reach the token check (unknown token: 401), the rest of
    # the burst is refused with 429 by whichever replica gets it
    assert codes == [401] * DEFAULT_BURST + [429] * 4, codes
    refused = answers[DEFAULT_BURST:]
    assert {url for url, _ in refused} == {a.url, b.url}
    assert all(int(r.headers["Retry-After"]) >= 1 for _, r in refused)
    assert "too many enrolment attempts" in refused[0][1].json()["detail"]


def test_concurrent_attempts_through_separate_connections_spend_one_bucket(db_url: str) -> None:
    """Two replicas' stores (separate engines) racing on one address's first bucket: exactly
    ``burst`` attempts pass on SQLite and PostgreSQL (the row lock and the insert race)."""
    from concurrent.futures import ThreadPoolExecutor

    from controller.db import migrate
    from controller.db.rate_store import RateBucketStore
    from controller.db.session import make_engine
    from controller.trust.enrolment_rate import SharedRateLimiter

    migrate.upgrade(db_url)
    engines = [make_engine(db_url), make_engine(db_url)]
    try:
        limiters = [
            SharedRateLimiter(RateBucketStore(e), burst=5, rate_per_s=1e-6) for e in engines
        ]
        with ThreadPoolExecutor(8) as pool:
            waits = list(pool.map(lambda i: limiters[i % 2].take("10.9.8.7"), range(16)))
        assert sum(w is None for w in waits) == 5, waits
        assert limiters[0].take("10.9.8.6") is None  # another address has its own bucket
    finally:
        for engine in engines:
            engine.dispose()
