"""The thread that supervises the ingest worker processes runs again after an unexpected error
(it used to stop for good: no dead worker was started again, no report was read). Real worker
processes killed with SIGKILL, real Mosquitto, real SQLite; the injected failure is a batch
counter that refuses one worker report."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

from controller.db import migrate
from controller.db.repository import Repository
from controller.db.session import make_engine
from controller.db.telemetry_store import TelemetryStore
from controller.ingest.batch import IngestBatcher
from controller.ingest.batch_stats import BatchCounts
from controller.ingest.handlers import Ingest
from controller.ingest.pool import start_ingest_workers
from controller.settings import Settings
from shared.codec import encode
from shared.topics import Channel, Topics
from shared.transport import MqttAuth
from tests.integration.controller.agent_messages import telemetry
from tests.integration.controller.conftest import MqttPeer, poll


class CountersFailingOnce(IngestBatcher):
    """The main process's batch counters; the first worker report they get raises."""

    failed = False

    def absorb(self, counts: BatchCounts) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("injected: a worker report could not be counted")
        super().absorb(counts)


def test_a_killed_worker_is_restarted_after_the_supervisor_crashed(
    sqlite_url: str, mosquitto: str, tmp_path: Path
) -> None:
    prefix = f"jfpool/{uuid.uuid4().hex[:10]}"
    topics = Topics(prefix)
    settings = Settings(
        db_url=sqlite_url,
        broker_url=mosquitto,
        data_dir=tmp_path / "data",
        topic_prefix=prefix,
        ingest_workers=1,
    )
    migrate.upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    telemetry_store = TelemetryStore(engine)
    batcher = CountersFailingOnce(telemetry_store)
    ingest = Ingest(Repository(engine), topics, batcher=batcher)
    workers = start_ingest_workers(settings, mosquitto, MqttAuth(), ingest, batcher)
    assert workers is not None
    agent = MqttPeer(mosquitto).connect()
    topic = topics.device("gw-1", Channel.TELEMETRY)
    try:
        [first_pid] = workers.pids()
        # the worker's first report (its heartbeat, within a second) crashes the supervisor
        poll(lambda: batcher.failed, 30, "the report that crashes the supervisor")

        os.kill(first_pid, signal.SIGKILL)
        poll(lambda: workers.restarts == 1, 30, "the killed worker started again")
        [second_pid] = poll(workers.pids, 60, "the new worker subscribed")
        assert second_pid != first_pid

        agent.publish(topic, encode(telemetry("gw-1", "s-1")))
        poll(lambda: telemetry_store.counts()["samples"] == 1, 30, "the sample stored")
        poll(lambda: batcher.stats().samples_persisted == 1, 30, "the new worker's report read")
    finally:
        agent.close()
        workers.stop()
        engine.dispose()
