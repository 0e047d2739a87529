"""Build leases (pure): may this device build this engine now?

When twins need the same engine at once, exactly one should build it and the rest pull it. A
lease per engine key names the one builder until it expires (a builder that died frees it by
timing out). The clock is a parameter so expiry is tested without waiting; the database adapter
runs :func:`decide` inside one locked transaction, which is what makes a race have one winner.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from controller.records import Decision as Decision
from controller.records import Lease as Lease


def decide(existing: Lease | None, device_id: str, ttl_s: float, now: datetime) -> Decision:
    """Grant when nobody holds an unexpired lease or the caller holds it (renewal), else deny."""
    if existing is None or existing.expires_at <= now or existing.holder == device_id:
        return Decision(True, Lease(device_id, now + timedelta(seconds=ttl_s)))
    return Decision(False, existing)
