"""What agents send while PostgreSQL restarts is stored once it is back.

The batch writer keeps a telemetry batch while the database cannot be reached (connection
refused or cut, server shutting down) instead of giving it up after four attempts and dropping
it; only a refusal of the data itself is dropped (``test_telemetry_writer_faults``). A reported
state waits in its inbox lane the same way instead of being logged and dropped. Against a real
PostgreSQL cluster this test owns, stopped and started (never the shared server)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from controller.db.identity_store import IdentityStore
from controller.db.repository import Repository
from controller.db.telemetry_store import TelemetryStore
from controller.ingest.batch import IngestBatcher
from controller.ingest.handlers import Ingest
from shared.codec import encode
from shared.facts import DeviceFacts
from shared.messages import ReportedState, SlotPhase, SlotStatus, Status
from shared.topics import Channel, Topics
from tests.integration.controller.db.conftest import migrated
from tests.integration.health.samples import sample
from tests.pg_cluster import Cluster, ClusterError

pytestmark = pytest.mark.timeout(180)

OUTAGE_S = 8.0
"""How long the server stays down: longer than the writer's four attempts (0.5 + 1 + 2 s of
back-off) that used to end in dropping the batch."""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    try:
        made = Cluster(tmp_path, database="telemetry")
    except ClusterError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        made.start()
        yield made
    finally:
        made.remove()


def test_samples_sent_while_postgresql_is_down_are_stored_once_it_is_back(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    engine = migrated(cluster.url)
    store = TelemetryStore(engine)
    batcher = IngestBatcher(store, max_batch=100, linger_s=0.05)
    written = threading.Event()
    batcher.start()
    try:
        for n in range(5):
            batcher.submit(sample("gw-1", n))
        assert batcher.drain(30)

        cluster.stop()  # pg_ctl stop -m fast: the pool's connections are cut
        for n in range(5, 10):
            batcher.submit(sample("gw-1", n))
        batcher.after_written(written.set)  # the ingest link's PUBACKs wait for this
        time.sleep(OUTAGE_S)  # the outage itself, not a wait for a state
        assert not written.is_set(), "acknowledged while the database was down: lost"
        cluster.start()

        assert batcher.drain(120), "the held batch must be written once the server is back"
        assert written.is_set()
        for n in range(10, 12):
            batcher.submit(sample("gw-1", n))
        assert batcher.drain(30)
        batcher.stop()
        assert store.counts()["samples"] == 12
    finally:
        batcher.stop()
        engine.dispose()
    stats = batcher.stats()
    assert stats.dropped == 0
    assert stats.samples_persisted == 12
    assert stats.write_errors >= 1
    held = [r for r in caplog.records if "database is unavailable" in r.getMessage()]
    back = [r for r in caplog.records if "database is back" in r.getMessage()]
    assert held, [r.getMessage() for r in caplog.records]
    assert back, [r.getMessage() for r in caplog.records]


def test_a_batch_held_longer_than_the_outage_limit_is_given_up_and_counted(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    engine = migrated(cluster.url)
    store = TelemetryStore(engine)
    batcher = IngestBatcher(store, max_batch=100, linger_s=0.05, outage_limit_s=2.0)
    written = threading.Event()
    batcher.start()
    try:
        cluster.stop()
        for n in range(3):
            batcher.submit(sample("gw-1", n))
        batcher.after_written(written.set)
        assert batcher.drain(60), "past the limit the batch is given up, not held for ever"
        assert written.is_set()
        cluster.start()
        batcher.submit(sample("gw-1", 3))
        assert batcher.drain(60)
        batcher.stop()
        assert store.counts()["samples"] == 1
    finally:
        batcher.stop()
        engine.dispose()
    assert batcher.stats().dropped == 3
    assert any(
        r.levelno == logging.ERROR and "stayed unavailable" in r.getMessage()
        for r in caplog.records
    )


def test_stopping_while_postgresql_is_down_leaves_the_batch_unacknowledged(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Neither stored nor dropped: without its acknowledgement the broker sends it again to the
    controller's next session."""
    engine = migrated(cluster.url)
    batcher = IngestBatcher(TelemetryStore(engine), max_batch=2, linger_s=0.05)
    written = threading.Event()
    batcher.start()
    try:
        cluster.stop()
        for n in range(3):  # two batches: the marker after the second stands for both
            batcher.submit(sample("gw-1", n))
        batcher.after_written(written.set)
        deadline = time.monotonic() + 30
        while not any("database is unavailable" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, "the writer never met the outage"
            time.sleep(0.1)
        batcher.stop()
        assert batcher.drain(5)
    finally:
        batcher.stop()
        engine.dispose()
    assert not written.is_set(), "acknowledged without being stored: lost"
    assert batcher.stats().dropped == 0
    assert any("left unacknowledged" in r.getMessage() for r in caplog.records)


def test_a_reported_state_that_arrives_while_postgresql_is_down_is_stored_once_it_is_back(
    cluster: Cluster,
) -> None:
    """The device's report of its new version: dropped, its rollout would wait for a report
    that never comes (the agent reports again only when something changes)."""
    engine = migrated(cluster.url)
    repo = Repository(engine)
    topics = Topics("jf/v1")
    ingest = Ingest(repo, topics, IngestBatcher(TelemetryStore(engine)))
    now = datetime.now(timezone.utc)
    serving = SlotStatus(
        name="det", desired_version="2", active_version="2", phase=SlotPhase.SERVING,
        updated_at=now,
    )  # fmt: skip
    facts = DeviceFacts(hostname="gw-1", os="Ubuntu 22.04", arch="aarch64")
    report = ReportedState(
        device_id="gw-1",
        observed_generation=4,
        reported_at=now,
        slots=(serving,),
        facts=facts,
        agent_version="test",
    )
    topic = topics.device("gw-1", Channel.REPORTED)
    lane = threading.Thread(target=ingest.handle, args=(topic, encode(report)), daemon=True)
    try:
        repo.record_contact("gw-1", report.reported_at)
        cluster.stop()
        lane.start()  # the inbox's lane worker handles it while the server is down
        time.sleep(OUTAGE_S)  # the outage itself
        cluster.start()
        lane.join(60)
        assert not lane.is_alive()
        device = repo.device("gw-1")
    finally:
        engine.dispose()
    assert device.observed_generation == 4
    assert device.reported == (serving,)


def test_a_backlog_of_presence_that_arrives_while_postgresql_is_down_is_stored_once_it_is_back(
    cluster: Cluster,
) -> None:
    """A starting replica's backlog of retained statuses (stored many at once, their devices'
    revocation looked up first): the lookup waits out the outage with the batch, instead of
    failing it and the lane dropping every message in it."""
    engine = migrated(cluster.url)
    repo, identities = Repository(engine), IdentityStore(engine)
    topics = Topics("jf/v1")
    ingest = Ingest(
        repo, topics, IngestBatcher(TelemetryStore(engine)), revoked=identities.revoked_among
    )
    devices = [f"gw-{i}" for i in range(5)]
    backlog = [
        (topics.device(d, Channel.STATUS), encode(Status(device_id=d, state="online")))
        for d in devices
    ]
    lane = threading.Thread(target=ingest.handle_many, args=(backlog,), daemon=True)
    try:
        for device in devices:
            repo.record_contact(device, datetime.now(timezone.utc))
        cluster.stop()
        lane.start()  # the inbox's lane worker handles the backlog while the server is down
        time.sleep(OUTAGE_S)
        cluster.start()
        lane.join(60)
        assert not lane.is_alive()
        online = {d.id for d in repo.devices() if d.online}
    finally:
        engine.dispose()
    assert online == set(devices)
