"""What the controller keeps, made ready before anything else starts (:mod:`controller.server`).

:func:`prepare_storage` checks the TLS files, creates the data directory, brings the database to
this controller's schema (or refuses without ``--auto-migrate``) and opens the artifact store;
:func:`open_stores` opens the database engine and its stores, one per area.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from controller.artifacts.store import ArtifactStore, open_store
from controller.db import migrate
from controller.db.agent_store import AgentReleaseStore
from controller.db.config_store import ConfigStore
from controller.db.engine_store import EngineStoreDb
from controller.db.identity_store import IdentityStore
from controller.db.job_store import JobStore
from controller.db.rate_store import RateBucketStore
from controller.db.repository import Repository
from controller.db.rollout_store import RolloutStore
from controller.db.session import make_engine, redact
from controller.db.signing_store import SigningStore
from controller.db.telemetry_store import TelemetryStore
from controller.db.token_store import TokenStore
from controller.errors import DatabaseError
from controller.settings import Settings
from controller.trust.tls_files import check_broker_tls, check_server_tls

logger = logging.getLogger(__name__)


def prepare_storage(s: Settings) -> ArtifactStore:
    """The checked artifact store, once the TLS files, data directory and schema are ready."""
    check_server_tls(s.tls_cert_file, s.tls_key_file)
    check_broker_tls(s.broker_auth)
    s.data_dir.mkdir(parents=True, exist_ok=True)
    if not migrate.is_up_to_date(s.db_url):
        if not s.auto_migrate:
            raise DatabaseError(
                f"database {redact(s.db_url)} is not at this controller's schema: run "
                f"`jetfleet db upgrade --db {redact(s.db_url)}` first "
                "(or start with --auto-migrate)"
            )
        migrate.upgrade(s.db_url)
    store = open_store(s)
    store.check()
    logger.info("artifact store: %s", store.label)
    return store


@dataclass(frozen=True)
class Stores:
    """The database's stores, over one engine (making them touches no database)."""

    signing: SigningStore
    repo: Repository
    tokens: TokenStore
    configs: ConfigStore
    engines: EngineStoreDb
    telemetry: TelemetryStore
    identities: IdentityStore
    jobs: JobStore
    rollouts: RolloutStore
    rate_buckets: RateBucketStore
    agents: AgentReleaseStore


def open_stores(db_url: str, stoppers: list[Callable[[], None]]) -> Stores:
    """The stores of the database at ``db_url``; its engine is disposed of by ``stoppers``."""
    engine = make_engine(db_url)
    stoppers.append(engine.dispose)
    return Stores(
        signing=SigningStore(engine),
        repo=Repository(engine),
        tokens=TokenStore(engine),
        configs=ConfigStore(engine),
        engines=EngineStoreDb(engine),
        telemetry=TelemetryStore(engine),
        identities=IdentityStore(engine),
        jobs=JobStore(engine),
        rollouts=RolloutStore(engine),
        rate_buckets=RateBucketStore(engine),
        agents=AgentReleaseStore(engine),
    )
