"""The controller's services, wired once by the server and handed to the HTTP API."""

from __future__ import annotations

from dataclasses import dataclass

from controller.artifacts import ArtifactStore
from controller.catalog import Catalog
from controller.configs import Configs
from controller.db.repository import Repository
from controller.db.telemetry_store import TelemetryStore
from controller.engines import EngineStore
from controller.fleet import Fleet
from controller.ingest import Ingest
from controller.ingest_batch import IngestBatcher
from controller.rollouts.service import RolloutService


@dataclass(frozen=True)
class Services:
    """Everything the routes call."""

    repo: Repository
    store: ArtifactStore
    catalog: Catalog
    configs: Configs
    engines: EngineStore
    fleet: Fleet
    ingest: Ingest
    database_label: str
    """The database URL with its password hidden."""
    broker_label: str
    """The broker URL the controller is connected to."""
    telemetry: TelemetryStore | None = None
    """Telemetry reads, rollups and retention (issue 6); None when wired without it."""
    batcher: IngestBatcher | None = None
    """The batched telemetry writer (issue 6)."""
    rollouts: RolloutService | None = None
    """Rollouts in waves (issue 5); None when wired without the rollout loop."""
