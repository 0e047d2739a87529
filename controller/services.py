"""The controller's services, wired once by the server and handed to the HTTP API."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.artifacts.engines import EngineStore
from controller.artifacts.store import ArtifactStore
from controller.auth.service import AccessControl
from controller.db.repository import Repository
from controller.db.telemetry_store import TelemetryStore
from controller.fleet.agent_releases import AgentReleases
from controller.fleet.catalog import Catalog
from controller.fleet.configs import Configs
from controller.fleet.deployments import Fleet
from controller.ingest.batch import IngestBatcher
from controller.ingest.handlers import Ingest
from controller.jobs.service import JobService
from controller.rollouts.service import RolloutService
from controller.settings import HealthThresholds
from controller.trust.enrolment import EnrolmentService
from controller.trust.enrolment_rate import SharedRateLimiter


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
    """Telemetry reads, rollups and retention; None when wired without it."""
    batcher: IngestBatcher | None = None
    """The batched telemetry writer."""
    rollouts: RolloutService | None = None
    """Rollouts in waves; None when wired without the rollout loop."""
    jobs: JobService | None = None
    """On-device profiling and tuning jobs; None when wired without them."""
    access: AccessControl | None = None
    """API tokens, roles and the audit log; None serves the API without checks."""
    enrolment: EnrolmentService | None = None
    """Device enrolment, identities and revocation; None without it."""
    enrol_limiter: SharedRateLimiter | None = None
    """The enrolment rate limit kept in the database, shared by every replica;
    None: one kept in this process's memory."""
    health: HealthThresholds = field(default_factory=HealthThresholds)
    """When devices count as degraded or offline (``Settings.health``)."""
    agent_releases: AgentReleases | None = None
    """Agent releases pushed to the fleet; None when wired without them."""
