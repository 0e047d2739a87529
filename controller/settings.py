"""Settings of one controller process, and the parsing of the address forms its options take.

Most settings come from ``jetfleet serve``'s options (controller/cli/serve.py); the health
thresholds and telemetry retention come from environment variables only
(``JETFLEET_HEALTH_<NAME>``, ``JETFLEET_RETENTION_RAW_HOURS``, ``JETFLEET_RETENTION_ROLLUP_DAYS``,
``JETFLEET_ROLLOUT_LEASE_TTL_S``, ``JETFLEET_INGEST_SESSION_EXPIRY_S``), read once with
:func:`from_environment`, where a bad value stops the start with one line naming the variable.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal

from controller.errors import InvalidInput
from shared import transport
from shared.topics import DEFAULT_PREFIX
from shared.transport import MqttAuth

DATA_DIR_ENV = "JETFLEET_DATA_DIR"
DEFAULT_DATA_DIR = ".jetfleet"
DEFAULT_HTTP = ("127.0.0.1", 8080)
DEFAULT_EMBEDDED_BROKER = ("127.0.0.1", 1884)
DEFAULT_MAX_UPLOAD_BYTES = 2 * 1024**3
DEFAULT_MAX_MQTT_PAYLOAD_BYTES = 1024**2
DEFAULT_MAX_MODEL_NODES = 100_000
"""5-10x the largest vision exports (ResNet/YOLO/ViT: up to ~10-20k nodes); the analysis of
100k nodes takes about 10 s of one core (bench/analysis_scaling.py)."""
DEFAULT_ANALYSIS_TIMEOUT_S = 120.0
DEFAULT_REFERENCE_TIMEOUT_S = 60.0
"""Four cases of a large detector on one CPU core take a few seconds; a minute is generous."""
HEALTH_ENV_PREFIX = "JETFLEET_HEALTH_"
RETENTION_RAW_ENV = "JETFLEET_RETENTION_RAW_HOURS"
RETENTION_ROLLUP_ENV = "JETFLEET_RETENTION_ROLLUP_DAYS"
DEFAULT_RETENTION_RAW_S = 24 * 3600.0
DEFAULT_RETENTION_ROLLUP_S = 30 * 24 * 3600.0
ROLLOUT_LEASE_TTL_ENV = "JETFLEET_ROLLOUT_LEASE_TTL_S"
DEFAULT_ROLLOUT_LEASE_TTL_S = 10.0
"""How long the rollout lease outlives its holder's last renewal (renewed every half TTL)."""
DEFAULT_ARTIFACT_CACHE_BYTES = 8 * 1024**3
"""Local copies of object-store artifacts kept for the readers that need a file (analysis,
reference outputs) and for downloads served from this replica's disk."""
S3Addressing = Literal["auto", "path", "virtual"]
S3_ADDRESSING: tuple[S3Addressing, ...] = ("auto", "path", "virtual")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
REPLICA_ID_ENV = "JETFLEET_REPLICA_ID"
INGEST_SESSION_EXPIRY_ENV = "JETFLEET_INGEST_SESSION_EXPIRY_S"
DEFAULT_INGEST_SESSION_EXPIRY_S = 3600
"""How long the broker keeps an ingest link's session (and queues its telemetry) after the link's
connection ends: a controller restarted within this collects what agents sent meanwhile."""
_REPLICA_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class HealthThresholds:
    """When a device stops being healthy (controller/fleet/health.py); each can be set by
    ``JETFLEET_HEALTH_<NAME>`` (e.g. ``JETFLEET_HEALTH_P99_MS=250``)."""

    offline_after_s: float = 90.0
    """Nothing received for this long → offline (3 missed samples at the default 30 s)."""
    window_s: float = 300.0
    """The recent telemetry window the other thresholds are judged over."""
    error_rate: float = 0.05
    """Errors / requests above this → degraded."""
    min_requests: int = 20
    """Error rates over fewer requests than this are not judged (one error in two is noise)."""
    p99_ms: float = 500.0
    """Worst p99 latency of any model above this → degraded."""
    temperature_c: float = 85.0
    """Hottest sensor above this → degraded (Orin throttles from about 99 °C)."""
    memory_headroom: float = 0.10
    """Available / total memory below this fraction → degraded (CPU and GPU share it on Jetson)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HealthThresholds:
        """Defaults overridden by ``JETFLEET_HEALTH_*`` variables; a bad value names the fix."""
        values: dict[str, float | int] = {}
        for f in fields(cls):
            name = HEALTH_ENV_PREFIX + f.name.upper()
            raw = env.get(name)
            if raw is None or raw == "":
                continue
            try:
                number = float(raw)
            except ValueError as exc:
                raise InvalidInput(
                    f"{name}={raw!r} is not a number: set it to e.g. {getattr(cls, f.name)}"
                ) from exc
            if number < 0:
                raise InvalidInput(f"{name} must be >= 0, got {raw}")
            values[f.name] = int(number) if f.name == "min_requests" else number
        return cls(**values)  # type: ignore[arg-type]


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


def parse_artifact_store(url: str) -> tuple[str, str]:
    """Bucket and key prefix of ``s3://BUCKET[/PREFIX]``; InvalidInput names the option."""
    scheme, sep, rest = url.partition("://")
    bucket, _, prefix = rest.partition("/")
    if scheme != "s3" or not sep or not _BUCKET.fullmatch(bucket):
        raise InvalidInput(
            f"--artifact-store expects s3://BUCKET or s3://BUCKET/PREFIX with a bucket name of "
            f"3-63 of a-z 0-9 . - (without it: the data directory), got {url!r}"
        )
    return bucket, prefix.strip("/")


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
    """``settings`` with the fields only environment variables set: the health thresholds, the
    telemetry retention and the rollout lease TTL. :class:`InvalidInput` names a bad variable
    and a valid value."""
    raw_hours = _positive(env, RETENTION_RAW_ENV, DEFAULT_RETENTION_RAW_S / 3600)
    rollup_days = _positive(env, RETENTION_ROLLUP_ENV, DEFAULT_RETENTION_ROLLUP_S / 86400)
    lease_ttl = _positive(env, ROLLOUT_LEASE_TTL_ENV, DEFAULT_ROLLOUT_LEASE_TTL_S)
    return dataclasses.replace(
        settings,
        health=HealthThresholds.from_env(env),
        retention_raw_s=raw_hours * 3600,
        retention_rollup_s=rollup_days * 86400,
        rollout_lease_ttl_s=lease_ttl,
        ingest_session_expiry_s=_session_expiry(env),
    )


def check_replica_id(value: str) -> str:
    """``value`` when it is a valid replica id, else :class:`InvalidInput` naming the rule."""
    if not _REPLICA_ID.fullmatch(value):
        raise InvalidInput(
            f"replica id {value!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit (e.g. --replica-id ctl-1)"
        )
    return value


def _session_expiry(env: Mapping[str, str]) -> int:
    raw = env.get(INGEST_SESSION_EXPIRY_ENV)
    if raw is None or raw == "":
        return DEFAULT_INGEST_SESSION_EXPIRY_S
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= 0xFFFFFFFE:
        raise InvalidInput(
            f"{INGEST_SESSION_EXPIRY_ENV}={raw!r}: give whole seconds, 0 to 4294967294 "
            f"(0: nothing kept while the controller is down; default "
            f"{DEFAULT_INGEST_SESSION_EXPIRY_S})"
        )
    return value


def _positive(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise InvalidInput(f"{name}={raw!r} is not a number: set e.g. {name}={default:g}") from exc
    if value <= 0:
        raise InvalidInput(f"{name} must be > 0, got {raw}")
    return value


def default_data_dir() -> Path:
    """``$JETFLEET_DATA_DIR`` or ``./.jetfleet``."""
    return Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)


def default_db_url(data_dir: Path) -> str:
    """The SQLite file inside the data directory."""
    return f"sqlite:///{data_dir.resolve() / 'jetfleet.db'}"


def parse_host_port(text: str, option: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (``[v6]:PORT`` too); the error names the option."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise InvalidInput(f"{option} expects HOST:PORT (e.g. 127.0.0.1:8080), got {text!r}")
    return host.strip("[]"), int(port_text)


def parse_broker_url(url: str) -> tuple[str, int]:
    """Host and port of an ``mqtt://`` or ``mqtts://`` URL (ports 1883 / 8883 when absent)."""
    try:
        address = transport.parse_broker_url(url)
    except ValueError as exc:
        raise InvalidInput(f"invalid broker URL {url!r}: {exc}") from exc
    return address.host, address.port


def parse_trusted_proxy(text: str) -> str:
    """An IP address or CIDR network (``10.0.0.0/24``), normalised; InvalidInput otherwise, and
    for a network with host bits (``10.0.0.5/24`` was silently widened to the whole /24) or one
    that holds every address (``0.0.0.0/0``: every client could then claim any address)."""
    try:
        if "/" in text:
            network = ipaddress.ip_network(text.strip(), strict=False)
        else:
            return str(ipaddress.ip_address(text.strip()))
    except ValueError as exc:
        raise InvalidInput(
            f"--trusted-proxy expects an IP address or network (e.g. 10.0.0.5 or 10.0.0.0/24), "
            f"got {text!r}"
        ) from exc
    address = text.strip().split("/", 1)[0]
    if ipaddress.ip_address(address) != network.network_address:
        raise InvalidInput(
            f"--trusted-proxy {text}: the address has bits outside the /{network.prefixlen} "
            f"network; give the proxy ({address}) or the network ({network})"
        )
    if network.prefixlen == 0:
        raise InvalidInput(
            f"--trusted-proxy {text} trusts X-Forwarded-For from every address: any client "
            "could claim any address (rate limits, audit); name the proxies' addresses"
        )
    return str(network)
