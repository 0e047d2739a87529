"""The controller's fleet parts wired as ``controller.server`` wires them (real database, real
Mosquitto), for tests that run one background loop of their own over them with an injected
failure (a store whose method raises once) and watch what a user would see."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from controller.analysis.reference_runner import ReferenceRunner
from controller.analysis.runner import AnalysisRunner
from controller.artifacts.store import ArtifactStore
from controller.db import migrate
from controller.db.config_store import ConfigStore
from controller.db.job_store import JobStore
from controller.db.repository import Repository
from controller.db.session import make_engine
from controller.db.signing_store import SigningStore
from controller.db.telemetry_store import TelemetryStore
from controller.fleet.catalog import Catalog
from controller.fleet.configs import Configs
from controller.fleet.deployments import Fleet
from controller.jobs.carry import pending_jobs
from controller.mqtt_bus import MqttBus
from controller.trust.signing import FleetSigner
from shared.codec import decode
from shared.messages import DesiredState, Event
from shared.topics import Channel, Topics
from tests.integration.controller.conftest import MqttPeer, poll

PUBLIC_URL = "http://127.0.0.1:9"


def now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class FleetParts:
    """Database, catalog, configs, signer and a fleet publishing on a real broker."""

    db_url: str
    data_dir: Path
    topics: Topics
    repo: Repository
    catalog: Catalog
    configs: Configs
    signer: FleetSigner
    fleet: Fleet
    job_store: JobStore
    telemetry: TelemetryStore

    def add_device(self, device_id: str) -> None:
        """A device as its first message creates it."""
        self.repo.record_contact(device_id, now())

    def add_version(self, model: str, version: str) -> None:
        """A model version in the catalog (its bytes are not needed to sign its manifest)."""
        sha = uuid.uuid4().hex * 2
        self.repo.add_version(model, version, sha, 1234, [], [])

    def store_event(self, event: Event) -> None:
        """Store a device's event as ingest does (its batched writer)."""
        assert self.telemetry.write_batch([], [event], now()).events_inserted == 1


@contextmanager
def fleet_parts(
    db_url: str, broker_url: str, data_dir: Path, job_store: JobStore | None = None
) -> Iterator[FleetParts]:
    """Wire the parts (``job_store``: the jobs table the fleet reads pending jobs from)."""
    migrate.upgrade(db_url)
    engine = make_engine(db_url)
    topics = Topics(f"jftest/{uuid.uuid4().hex[:10]}")
    bus = MqttBus(broker_url, topics, lambda _topic, _payload: None, subscriptions=[])
    try:
        repo = Repository(engine)
        store = ArtifactStore(data_dir)
        catalog = Catalog(
            repo,
            store,
            PUBLIC_URL,
            queue_analysis=AnalysisRunner(repo, store, 60.0).submit,
            compute_reference=ReferenceRunner(60.0).compute,
        )
        configs = Configs(ConfigStore(engine), repo, catalog)
        signer = FleetSigner(SigningStore(engine), data_dir)
        signer.ensure_key()
        jobs = job_store or JobStore(engine)
        fleet = Fleet(
            repo,
            catalog,
            configs,
            bus,
            topics,
            PUBLIC_URL,
            signer=signer,
            pending_jobs=pending_jobs(jobs),
        )
        bus.start()
        yield FleetParts(
            db_url,
            data_dir,
            topics,
            repo,
            catalog,
            configs,
            signer,
            fleet,
            jobs,
            TelemetryStore(engine),
        )
    finally:
        bus.stop()
        engine.dispose()


class DesiredWatch:
    """A real MQTT client reading one device's retained desired documents."""

    def __init__(self, broker_url: str, topics: Topics, device_id: str) -> None:
        self.topic = topics.device(device_id, Channel.DESIRED)
        self.peer = MqttPeer(broker_url).connect()
        self.peer.subscribe(self.topic)

    def latest(self) -> DesiredState | None:
        payloads = [p for p in self.peer.on(self.topic) if p]
        return decode(DesiredState, payloads[-1]) if payloads else None

    def wait_for(self, what: str, check: object) -> DesiredState:
        """The first document ``check(doc)`` accepts (within 30 s)."""

        def found() -> DesiredState | None:
            doc = self.latest()
            return doc if doc is not None and check(doc) else None  # type: ignore[operator]

        return poll(found, 30, what)

    def close(self) -> None:
        self.peer.close()
