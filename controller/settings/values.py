"""The resolved settings of one controller process: what the rest of the controller consumes.

:mod:`controller.settings.serve` and :mod:`controller.settings.environment` (the pydantic-settings
tree of ``jetfleet serve``'s options and environment variables) produce them.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from controller.settings.defaults import (
    DATA_DIR_ENV,
    DEFAULT_ANALYSIS_TIMEOUT_S,
    DEFAULT_ARTIFACT_CACHE_BYTES,
    DEFAULT_DATA_DIR,
    DEFAULT_EMBEDDED_BROKER,
    DEFAULT_HTTP,
    DEFAULT_INGEST_SESSION_EXPIRY_S,
    DEFAULT_MAX_MODEL_NODES,
    DEFAULT_MAX_MQTT_PAYLOAD_BYTES,
    DEFAULT_MAX_UPLOAD_BYTES,
    DEFAULT_REFERENCE_TIMEOUT_S,
    DEFAULT_RETENTION_RAW_S,
    DEFAULT_RETENTION_ROLLUP_S,
    DEFAULT_ROLLOUT_LEASE_TTL_S,
    S3Addressing,
)
from controller.settings.environment import EnvironmentSettings, HealthThresholds
from shared.topics import DEFAULT_PREFIX
from shared.transport import MqttAuth


@dataclass(frozen=True)
class ObjectStoreSettings:
    """Artifacts and engines in an S3-compatible bucket (``--artifact-store s3://BUCKET/PREFIX``),
    for replicas that share no disk. Credentials come from boto3's standard chain only
    (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and
    the shared files, an instance role), never from a command line."""

    bucket: str
    prefix: str = ""
    """Key prefix inside the bucket (no leading or trailing ``/``); objects are
    ``<prefix>/artifacts/<sha[:2]>/<sha>``."""
    endpoint_url: str | None = None
    """None: ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``, else AWS's own endpoint."""
    region: str | None = None
    """None: ``AWS_REGION``/``AWS_DEFAULT_REGION`` or the profile's, else ``us-east-1``."""
    addressing: S3Addressing = "auto"
    """Bucket in the path (most self-hosted servers) or in the host name (AWS); auto: boto3's
    choice."""
    redirect_s: int = 0
    """0: every replica streams the objects to agents itself; > 0: ``GET /api/v1/artifacts/{sha}``
    answers 307 to a presigned URL valid this many seconds (agents must reach the endpoint)."""
    cache_bytes: int = DEFAULT_ARTIFACT_CACHE_BYTES
    """Bound of the local cache ``<data-dir>/artifact-cache`` (least recently used go first)."""

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


@dataclass(frozen=True)
class Settings:
    """Everything ``jetfleet serve`` needs to know, resolved (no defaults left to guess)."""

    db_url: str
    """SQLAlchemy URL of the database."""
    broker_url: str | None
    """``mqtt://host:port`` of an external broker; None starts the embedded one."""
    data_dir: Path
    """Root of the artifact store (and the default SQLite file); with ``object_store``, of its
    local cache only."""
    http_host: str = DEFAULT_HTTP[0]
    http_port: int = DEFAULT_HTTP[1]
    embedded_broker_host: str = DEFAULT_EMBEDDED_BROKER[0]
    embedded_broker_port: int = DEFAULT_EMBEDDED_BROKER[1]
    """Port of the embedded broker; 0 picks a free one."""
    public_url: str | None = None
    """Base URL agents use to download artifacts; None means ``http(s)://<http host>:<port>``."""
    topic_prefix: str = DEFAULT_PREFIX
    auto_migrate: bool = False
    """Upgrade the database schema at start instead of refusing to run on an old one."""
    broker_auth: MqttAuth = field(default_factory=MqttAuth)
    """The controller's own broker credential and TLS files (``mqtts://``)."""
    broker_admin: Literal["none", "dynsec", "embedded"] = "none"
    """Who keeps device broker credentials and topic ACLs (controller/broker_admin/):
    ``embedded`` (the in-process broker, which then refuses anonymous clients), ``dynsec``
    (Mosquitto's dynamic security plugin, managed with ``broker_auth``), ``none`` (an anonymous
    or hand-configured broker: enrolled devices get no broker credential)."""
    public_broker_url: str | None = None
    """Broker URL handed to enrolling devices; None: the URL the controller itself uses."""
    auth_required: bool = True
    """Every API request needs a bearer token; False only for throwaway set-ups."""
    tls_cert_file: Path | None = None
    """Serve HTTPS with this certificate (PEM) and ``tls_key_file``; None serves plain HTTP."""
    tls_key_file: Path | None = None
    object_store: ObjectStoreSettings | None = None
    """Artifacts and engines in an S3-compatible bucket; None: in ``<data_dir>/artifacts``."""
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    """Largest model, artifact or reference upload; a bigger body is refused with 413."""
    max_mqtt_payload_bytes: int = DEFAULT_MAX_MQTT_PAYLOAD_BYTES
    """Larger MQTT messages from agents are dropped undecoded and counted as rejected."""
    max_model_nodes: int = DEFAULT_MAX_MODEL_NODES
    """A pushed model with more nodes (subgraphs included) is refused with 422, unanalysed."""
    analysis_timeout_s: float = DEFAULT_ANALYSIS_TIMEOUT_S
    """The static analysis of a pushed version runs in a child process after the push answered;
    one running longer is killed and recorded as failed (controller/analysis/runner.py)."""
    reference_timeout_s: float = DEFAULT_REFERENCE_TIMEOUT_S
    """Computing a pushed version's reference outputs (during the push, in a child process)
    longer than this stops; the version is stored without them
    (controller/analysis/reference_runner.py)."""
    ingest_workers: int = 0
    """Telemetry ingest processes fed by an MQTT shared subscription (external Mosquitto only);
    0 keeps ingest in the controller process (controller/ingest/pool.py)."""
    trusted_proxies: tuple[str, ...] = ()
    """Addresses or networks (``10.0.0.5``, ``10.0.0.0/24``) of reverse proxies whose
    ``X-Forwarded-For`` names the client for rate limits and the audit log; empty: the header
    is ignored and the peer address is the client."""
    health: HealthThresholds = field(default_factory=HealthThresholds)
    """When devices count as degraded or offline (``JETFLEET_HEALTH_*``)."""
    retention_raw_s: float = DEFAULT_RETENTION_RAW_S
    """How long raw telemetry samples are kept (``JETFLEET_RETENTION_RAW_HOURS``, default 24)."""
    retention_rollup_s: float = DEFAULT_RETENTION_ROLLUP_S
    """How long minute rollups are kept (``JETFLEET_RETENTION_ROLLUP_DAYS``, default 30)."""
    rollout_lease_ttl_s: float = DEFAULT_ROLLOUT_LEASE_TTL_S
    """With several replicas, one runs the rollouts; when it dies (kill -9), another takes over
    at most this long after its last renewal (``JETFLEET_ROLLOUT_LEASE_TTL_S``, default 10).
    Every replica of one database should use the same value."""
    replica_id: str | None = None
    """This replica's stable name (``--replica-id``, ``JETFLEET_REPLICA_ID``), unique among the
    replicas of one fleet and the same across its restarts. It names the MQTT sessions its
    telemetry ingest keeps on the broker; set, the replicas split telemetry between them through a
    shared subscription. Unset: the host name and HTTP port, and this controller receives all
    telemetry itself (a restart on another port cannot lose a share held for the old name)."""
    ingest_session_expiry_s: int = DEFAULT_INGEST_SESSION_EXPIRY_S
    """How long the broker keeps ingest sessions after their connection ends
    (``JETFLEET_INGEST_SESSION_EXPIRY_S``; 0: clean sessions, nothing kept)."""

    def resolved_replica_id(self) -> str:
        """``replica_id``, or the host name and HTTP port; with port 0 (chosen by the system, so
        not stable anyway), the host name and a random suffix."""
        if self.replica_id:
            return self.replica_id
        host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:48] or "controller"
        return f"{host}-{self.http_port or uuid.uuid4().hex[:8]}"

    @property
    def http_scheme(self) -> str:
        """``https`` when a TLS certificate is configured, else ``http``."""
        return "https" if self.tls_cert_file is not None else "http"

    def resolved_public_url(self, http_port: int | None = None) -> str:
        """The artifact base URL, using the real HTTP port when the configured one was 0."""
        if self.public_url:
            return self.public_url.rstrip("/")
        host = self.http_host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        port = http_port if http_port is not None else self.http_port
        return f"{self.http_scheme}://{host}:{port}"


def from_environment(settings: Settings, env: Mapping[str, str]) -> Settings:
    """``settings`` with the fields only environment variables set (the health thresholds, the
    telemetry retention, the rollout lease TTL, the ingest session expiry), read by
    :class:`EnvironmentSettings`. :class:`InvalidInput` names a bad variable and a valid value."""
    read = EnvironmentSettings.read(env)
    return dataclasses.replace(
        settings,
        health=read.health(),
        retention_raw_s=read.retention_raw_hours * 3600,
        retention_rollup_s=read.retention_rollup_days * 86400,
        rollout_lease_ttl_s=read.rollout_lease_ttl_s,
        ingest_session_expiry_s=read.ingest_session_expiry_s,
    )


def default_data_dir() -> Path:
    """``$JETFLEET_DATA_DIR`` or ``./.jetfleet``."""
    return Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)


def default_db_url(data_dir: Path) -> str:
    """The SQLite file inside the data directory."""
    return f"sqlite:///{data_dir.resolve() / 'jetfleet.db'}"
