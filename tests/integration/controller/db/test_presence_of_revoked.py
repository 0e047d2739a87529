"""A revoked device's "online" presence is stored as offline, also when presence comes in a
batch: a replica that starts receives every device's retained status at once, and checking them
one query each held its inbox (and the reported states queued behind them) for tens of seconds
at 10,000 gateways. SQLite and the real PostgreSQL."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timezone

from sqlalchemy import Engine

from controller.db.identity_store import IdentityRecord, IdentityStore
from controller.db.repository import Repository
from controller.db.telemetry_store import TelemetryStore
from controller.ingest.batch import IngestBatcher
from controller.ingest.handlers import Ingest
from shared.codec import encode
from shared.messages import Status
from shared.topics import Channel, Topics

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
DEVICES = [f"gw-{i:03d}" for i in range(40)]
REVOKED = {"gw-003", "gw-017", "gw-031"}


def test_revoked_devices_stay_offline_when_their_presence_comes_in_a_batch(
    engine: Engine,
) -> None:
    repo, identities, topics = Repository(engine), IdentityStore(engine), Topics("jf/v1")
    for device in DEVICES:
        repo.record_contact(device, NOW)
        if device != "gw-039":  # never enrolled (an open broker): not revoked
            identities.put_identity(
                IdentityRecord(
                    device_id=device,
                    broker_username=f"jetfleet-{device}",
                    broker_password_hash=None,
                    api_token_id=None,
                    enrolled_at=NOW,
                    revoked_at=NOW if device in REVOKED else None,
                )
            )
    asked: list[set[str]] = []

    def revoked(device_ids: Collection[str]) -> set[str]:
        asked.append(set(device_ids))
        return identities.revoked_among(device_ids)

    batcher = IngestBatcher(TelemetryStore(engine))
    ingest = Ingest(repo, topics, batcher, revoked=revoked)
    try:
        ingest.handle_many(
            [
                (topics.device(d, Channel.STATUS), encode(Status(device_id=d, state="online")))
                for d in DEVICES
            ]
        )
    finally:
        batcher.stop()
    online = {d.id for d in repo.devices() if d.online}
    assert online == set(DEVICES) - REVOKED
    assert asked == [set(DEVICES)]  # one lookup for the batch, not one per status
