"""The build-lease decision with an injected clock: free, held, renewed, expired."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from controller.records import Lease, decide_lease

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_a_free_key_is_granted_for_the_ttl() -> None:
    decision = decide_lease(None, "gw-1", 60, T0)
    assert decision.granted
    assert decision.lease == Lease("gw-1", T0 + timedelta(seconds=60))


def test_a_held_key_is_denied_with_the_holder_and_expiry() -> None:
    held = Lease("gw-1", T0 + timedelta(seconds=60))
    decision = decide_lease(held, "gw-2", 60, T0 + timedelta(seconds=10))
    assert not decision.granted
    assert decision.lease == held


def test_the_holder_renews_its_own_lease() -> None:
    held = Lease("gw-1", T0 + timedelta(seconds=60))
    decision = decide_lease(held, "gw-1", 60, T0 + timedelta(seconds=50))
    assert decision.granted
    assert decision.lease.expires_at == T0 + timedelta(seconds=110)


def test_an_expired_lease_goes_to_the_next_device() -> None:
    held = Lease("gw-1", T0 + timedelta(seconds=60))
    decision = decide_lease(held, "gw-2", 30, T0 + timedelta(seconds=60))
    assert decision.granted
    assert decision.lease == Lease("gw-2", T0 + timedelta(seconds=90))
