"""The fleet's services (:mod:`controller.server`): trust, models, fleet, jobs and rollouts.

:func:`open_trust` loads (or creates) the fleet signing key and the API's access control;
:func:`start_model_side` starts the analysis and reference runners behind the catalog;
:func:`build_fleet` makes the fleet, jobs and the rollout loop; :func:`build_services` hands all
of it to the API as :class:`controller.services.Services`; :func:`start_leader_work` starts the
rollout loop and the work that runs only in the replica holding its lease.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from controller.analysis.reference_runner import ReferenceRunner
from controller.analysis.runner import AnalysisRunner
from controller.artifacts.engines import EngineStore
from controller.artifacts.store import ArtifactStore
from controller.auth.service import AccessControl, bootstrap_admin
from controller.db.schema import utcnow
from controller.db.session import redact
from controller.fleet.agent_releases import AgentReleases
from controller.fleet.catalog import Catalog
from controller.fleet.configs import Configs
from controller.fleet.deployments import Fleet
from controller.ingest.report_duty import ReportDuty
from controller.jobs.carry import pending_jobs
from controller.jobs.loop import JobLoop
from controller.jobs.service import JobService
from controller.rollouts.loop import RolloutLoop
from controller.rollouts.service import RolloutService
from controller.server.ingest_side import BrokerLinks, IngestSide
from controller.server.storage import Stores
from controller.services import Services
from controller.settings import Settings
from controller.trust.enrolment import EnrolmentService
from controller.trust.enrolment_rate import SharedRateLimiter
from controller.trust.refresher import SignatureRefresher
from controller.trust.signing import FleetSigner
from shared.messages import Status
from shared.topics import Channel, Topics

logger = logging.getLogger(__name__)

Stoppers = list[Callable[[], None]]


def open_trust(s: Settings, stores: Stores, http_url: str) -> tuple[FleetSigner, AccessControl]:
    """The fleet signer (its key created on first start) and API access control (the first
    admin token written to the data directory when there is none)."""
    signer = FleetSigner(stores.signing, s.data_dir)
    key, created = signer.ensure_key()
    logger.info("fleet signing key %s%s", key.key_id, " (created)" if created else "")
    access = AccessControl(stores.tokens, required=s.auth_required)
    bootstrap_admin(access, s.data_dir, http_url)
    return signer, access


@dataclass(frozen=True)
class ModelSide:
    """Pushed models, their configs and engines."""

    catalog: Catalog
    configs: Configs
    engines: EngineStore
    agents: AgentReleases
    """Agent releases (pushed like models, ordered by agent rollouts)."""


def start_model_side(
    s: Settings,
    stores: Stores,
    store: ArtifactStore,
    public_url: str,
    signer: FleetSigner,
    stoppers: Stoppers,
    on_exit: Stoppers,
) -> ModelSide:
    """Start the analysis runner; the catalog over it and the reference runner, which
    ``on_exit`` stops first (a push's child process must not hold the shutdown)."""
    analyses = AnalysisRunner(stores.repo, store, s.analysis_timeout_s)
    analyses.start()
    stoppers.append(analyses.stop)
    references = ReferenceRunner(s.reference_timeout_s)
    stoppers.append(references.stop)
    on_exit.append(references.stop)
    catalog = Catalog(
        stores.repo,
        store,
        public_url,
        queue_analysis=analyses.submit,
        compute_reference=references.compute,
        max_model_nodes=s.max_model_nodes,
    )
    configs = Configs(stores.configs, stores.repo, catalog)
    engines = EngineStore(stores.engines, store, signer=signer)
    agents = AgentReleases(stores.agents, store, public_url, signer=signer)
    return ModelSide(catalog, configs, engines, agents)


@dataclass(frozen=True)
class FleetSide:
    """Deployments, jobs and rollouts (nothing started yet)."""

    fleet: Fleet
    jobs: JobService
    rollout_loop: RolloutLoop
    report_duty: ReportDuty | None
    """Replicas only: follows reported state while this one runs the rollouts."""
    rollouts: RolloutService


def build_fleet(
    s: Settings,
    stores: Stores,
    models: ModelSide,
    signer: FleetSigner,
    links: BrokerLinks,
    topics: Topics,
    public_url: str,
    on_lead: Callable[[], None],
) -> FleetSide:
    """The fleet over the outgoing bus, jobs, and the rollout loop (``on_lead`` when this
    replica takes its lease)."""
    fleet = Fleet(
        stores.repo,
        models.catalog,
        models.configs,
        links.bus,
        topics,
        public_url,
        signer=signer,
        pending_jobs=pending_jobs(stores.jobs),
        agent_orders=models.agents.orders_for,
    )
    jobs = JobService(
        stores.jobs, stores.repo, models.catalog, models.configs, fleet, signer=signer
    )
    rollout_loop = RolloutLoop(
        stores.rollouts,
        stores.repo,
        fleet,
        lease_ttl_s=s.rollout_lease_ttl_s,
        holder=f"{s.resolved_replica_id()}-{uuid.uuid4().hex[:6]}",
        on_lead=on_lead,
        agents=models.agents,
    )
    report_duty = None
    if links.reports_follow_lease:
        report_duty = ReportDuty(
            links.inbound, [topics.every_device(Channel.REPORTED)], lambda: rollout_loop.leader
        )
    rollouts = RolloutService(
        stores.rollouts,
        stores.repo,
        models.catalog,
        models.configs,
        wake=rollout_loop.wake,
        agents=models.agents,
    )
    return FleetSide(fleet, jobs, rollout_loop, report_duty, rollouts)


def build_services(
    s: Settings,
    stores: Stores,
    store: ArtifactStore,
    access: AccessControl,
    models: ModelSide,
    ingest: IngestSide,
    links: BrokerLinks,
    fleet: FleetSide,
    public_url: str,
) -> Services:
    """Everything the API's routes call, device enrolment included."""
    repo = stores.repo
    broker_url = links.side.broker_url
    return Services(
        repo=repo,
        store=store,
        catalog=models.catalog,
        configs=models.configs,
        engines=models.engines,
        fleet=fleet.fleet,
        ingest=ingest.ingest,
        database_label=redact(s.db_url),
        broker_label=broker_url,
        telemetry=stores.telemetry,
        batcher=ingest.batcher,
        rollouts=fleet.rollouts,
        jobs=fleet.jobs,
        access=access,
        health=s.health,
        agent_releases=models.agents,
        enrolment=EnrolmentService(
            stores.identities,
            links.side.admin,
            access,
            controller_url=public_url,
            broker_url=s.public_broker_url or broker_url,
            topic_prefix=s.topic_prefix,
            on_revoked=lambda device: repo.record_status(
                Status(device_id=device, state="offline"), utcnow()
            ),
            devices=repo,
        ),
        enrol_limiter=SharedRateLimiter(stores.rate_buckets),
    )


def start_leader_work(fleet: FleetSide, signer: FleetSigner, stoppers: Stoppers) -> None:
    """Start the rollout loop, the report duty, the job loop and the re-signing thread."""
    rollout_loop = fleet.rollout_loop
    rollout_loop.start()
    stoppers.append(rollout_loop.stop)
    if fleet.report_duty is not None:
        fleet.report_duty.start()
        stoppers.append(fleet.report_duty.stop)

    # Singleton work runs in the replica holding the rollout lease: job events
    # and re-signing, like the rollouts and the republishing of desired documents.
    def leads() -> bool:
        return rollout_loop.leader

    job_loop = JobLoop(fleet.jobs, active=leads)
    job_loop.start()
    stoppers.append(job_loop.stop)
    refresher = SignatureRefresher(signer.stale, fleet.fleet.republish_all, active=leads)
    refresher.start()
    stoppers.append(refresher.stop)
