"""``jetfleet serve``'s options: one field each, with its option and environment variable
(``Opt``), type and bounds, default and help (the description). controller/cli/serve_options.py
makes the click options from these fields; :mod:`controller.settings.serve` checks them and
resolves them into the :class:`~controller.settings.values.Settings` the controller runs with."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from annotated_types import Ge, Le
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from controller.settings.defaults import (
    DATA_DIR_ENV,
    DEFAULT_ANALYSIS_TIMEOUT_S,
    DEFAULT_ARTIFACT_CACHE_BYTES,
    DEFAULT_EMBEDDED_BROKER,
    DEFAULT_HTTP,
    DEFAULT_MAX_MODEL_NODES,
    DEFAULT_MAX_MQTT_PAYLOAD_BYTES,
    DEFAULT_MAX_UPLOAD_BYTES,
    DEFAULT_REFERENCE_TIMEOUT_S,
    REPLICA_ID_ENV,
    S3Addressing,
)
from controller.settings.parsing import parse_size
from controller.settings.source import BAD_OPTION, Opt, refuse
from shared.topics import DEFAULT_PREFIX

ARTIFACT_STORE_ENV = "JETFLEET_ARTIFACT_STORE"


def _opt(flag: str, **kw: Any) -> Opt:
    return Opt(flag=flag, **kw)


def _file(flag: str) -> Opt:
    return Opt(flag=flag, readable_file=True)


class ServeFields(BaseSettings):
    """Every option of ``jetfleet serve``, as given; ``ServeOptions`` (controller/settings/
    serve.py) adds the checks and the resolution into settings."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

    db_url: Annotated[str | None, _opt("--db", metavar="URL")] = Field(
        default=None, description="SQLAlchemy URL [default: SQLite in the data dir]."
    )
    broker_url: Annotated[str | None, _opt("--broker", metavar="URL")] = Field(
        default=None,
        description="External broker mqtt://host:port, or mqtts://host:port for TLS "
        "[default: start the embedded broker].",
    )
    http: Annotated[str, _opt("--http", metavar="HOST:PORT", shown_default=True)] = Field(
        default=f"{DEFAULT_HTTP[0]}:{DEFAULT_HTTP[1]}",
        description="Where the HTTP API listens (port 0: a free one).",
    )
    data_dir: Annotated[Path | None, _opt("--data-dir", env=DATA_DIR_ENV, directory=True)] = Field(
        default=None,
        description=f"Artifacts and the default SQLite file [default: ${DATA_DIR_ENV} or "
        "./.jetfleet].",
    )
    auto_migrate: Annotated[bool, _opt("--auto-migrate")] = Field(
        default=False, description="Upgrade the database schema at start."
    )
    embedded: Annotated[str, _opt("--embedded-broker", metavar="HOST:PORT", shown_default=True)] = (
        Field(
            default=f"{DEFAULT_EMBEDDED_BROKER[0]}:{DEFAULT_EMBEDDED_BROKER[1]}",
            description="Where the embedded broker listens when --broker is not given (port 0: "
            "a free one).",
        )
    )
    public_url: Annotated[str | None, _opt("--public-url", metavar="URL")] = Field(
        default=None,
        description="Base URL agents download artifacts from [default: http(s)://<http host>:"
        "<port>].",
    )
    topic_prefix: Annotated[str, _opt("--topic-prefix", shown_default=True)] = Field(
        default=DEFAULT_PREFIX, description="MQTT topic prefix."
    )
    tls_cert: Annotated[Path | None, _file("--tls-cert")] = Field(
        default=None, description="Serve HTTPS with this PEM certificate."
    )
    tls_key: Annotated[Path | None, _file("--tls-key")] = Field(
        default=None, description="PEM private key of --tls-cert."
    )
    broker_ca: Annotated[Path | None, _file("--broker-ca")] = Field(
        default=None,
        description="CA bundle that signed the mqtts:// broker's certificate [default: system "
        "CAs].",
    )
    broker_cert: Annotated[Path | None, _file("--broker-cert")] = Field(
        default=None, description="Client certificate for the broker (PEM)."
    )
    broker_key: Annotated[Path | None, _file("--broker-key")] = Field(
        default=None, description="PEM private key of --broker-cert."
    )
    broker_user: Annotated[str | None, _opt("--broker-user", metavar="NAME")] = Field(
        default=None, description="The controller's broker user name."
    )
    broker_password_file: Annotated[Path | None, _file("--broker-password-file")] = Field(
        default=None,
        description="File holding the broker password of --broker-user (first line).",
    )
    max_upload: Annotated[int, _opt("--max-upload", size=True, shown_default="2G")] = Field(
        default=DEFAULT_MAX_UPLOAD_BYTES,
        description="Largest model/artifact/reference upload; larger ones get HTTP 413.",
    )
    max_mqtt_payload: Annotated[int, _opt("--max-mqtt-payload", size=True, shown_default="1M")] = (
        Field(
            default=DEFAULT_MAX_MQTT_PAYLOAD_BYTES,
            description="Larger MQTT messages from agents are dropped undecoded (counted as "
            "rejected).",
        )
    )
    max_model_nodes: Annotated[int, Ge(1), _opt("--max-model-nodes", shown_default=True)] = Field(
        default=DEFAULT_MAX_MODEL_NODES,
        description="Models with more nodes (subgraphs included) are refused with HTTP 422; "
        "large vision exports (ResNet, YOLO, ViT) have up to ~20k.",
    )
    analysis_timeout_s: Annotated[
        float, Ge(1.0), _opt("--analysis-timeout", metavar="SECONDS", shown_default=True)
    ] = Field(
        default=DEFAULT_ANALYSIS_TIMEOUT_S,
        description="A pushed model's static analysis (run in the background) that takes "
        "longer is stopped and recorded as failed.",
    )
    reference_timeout_s: Annotated[
        float, Ge(1.0), _opt("--reference-timeout", metavar="SECONDS", shown_default=True)
    ] = Field(
        default=DEFAULT_REFERENCE_TIMEOUT_S,
        description="Running a pushed model for its reference outputs (during the push) that "
        "takes longer is stopped; the version is stored without them (push your own with "
        "--reference).",
    )
    broker_admin: Annotated[
        Literal["auto", "none", "dynsec", "embedded"], _opt("--broker-admin", shown_default=True)
    ] = Field(
        default="auto",
        description="Who keeps device broker credentials and topic ACLs: embedded = the "
        "embedded broker (anonymous clients refused), dynsec = Mosquitto's dynamic security "
        "plugin (with --broker-user/--broker-password-file, see `jetfleet broker config`), "
        "none = an anonymous broker; auto = embedded without --broker, none with it.",
    )
    public_broker_url: Annotated[str | None, _opt("--public-broker-url", metavar="URL")] = Field(
        default=None,
        description="Broker URL enrolling devices are given [default: the one the controller "
        "uses].",
    )
    replica_id: Annotated[str | None, _opt("--replica-id", env=REPLICA_ID_ENV)] = Field(
        default=None,
        description="This replica's stable name, unique among the fleet's replicas (e.g. "
        "ctl-1): its telemetry sessions on the broker keep this name across restarts, and "
        "replicas with one split telemetry through a shared subscription. Default: host name "
        "and HTTP port.",
    )
    ingest_workers: Annotated[int, Ge(0), Le(64), _opt("--ingest-workers", shown_default=True)] = (
        Field(
            default=0,
            description="Processes that store telemetry, fed by an MQTT shared subscription "
            "(needs --broker with Mosquitto); 0 ingests in the controller process.",
        )
    )
    insecure_no_auth: Annotated[bool, _opt("--insecure-no-auth")] = Field(
        default=False,
        description="Serve the API without tokens: anyone who reaches it can change the fleet.",
    )
    trusted_proxies: Annotated[tuple[str, ...], _opt("--trusted-proxy", metavar="IP_OR_CIDR")] = (
        Field(
            default=(),
            description="A reverse proxy whose X-Forwarded-For names the client for enrolment "
            "rate limits and the audit log (repeat for several) [default: none; the header is "
            "ignored].",
        )
    )
    artifact_store: Annotated[
        str | None, _opt("--artifact-store", env=ARTIFACT_STORE_ENV, metavar="URL")
    ] = Field(
        default=None,
        description="s3://BUCKET[/PREFIX]: artifacts and engines in an S3-compatible bucket, "
        "for replicas that share no disk; credentials from AWS_ACCESS_KEY_ID/"
        "AWS_SECRET_ACCESS_KEY or AWS_PROFILE [default: the data directory].",
    )
    s3_endpoint: Annotated[str | None, _opt("--s3-endpoint", metavar="URL")] = Field(
        default=None,
        description="URL of the S3-compatible server, e.g. http://10.0.0.9:8333 "
        "[default: $AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL, else AWS].",
    )
    s3_region: Annotated[str | None, _opt("--s3-region", metavar="NAME")] = Field(
        default=None,
        description="The bucket's region [default: $AWS_REGION or the profile's, else us-east-1].",
    )
    s3_addressing: Annotated[S3Addressing, _opt("--s3-addressing", shown_default=True)] = Field(
        default="auto",
        description="Bucket in the URL path (most self-hosted servers) or in the host name (AWS).",
    )
    artifact_cache: Annotated[int, _opt("--artifact-cache", size=True, shown_default="8G")] = Field(
        default=DEFAULT_ARTIFACT_CACHE_BYTES,
        description="With --artifact-store: bound of the local copies kept in "
        "<data-dir>/artifact-cache.",
    )
    artifact_redirect_s: Annotated[
        int,
        Ge(0),
        Le(7 * 24 * 3600),
        _opt("--artifact-redirect", metavar="SECONDS", shown_default=True),
    ] = Field(
        default=0,
        description="With --artifact-store: answer artifact downloads with a redirect to a "
        "presigned URL valid this long (agents must reach the S3 endpoint); 0: the controller "
        "streams them.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)  # the variables come through ServeOptions.from_sources(env)

    @field_validator("max_upload", "max_mqtt_payload", "artifact_cache", mode="before")
    @classmethod
    def _size(cls, raw: Any) -> Any:
        if not isinstance(raw, str):
            return raw
        try:
            return parse_size(raw)
        except ValueError as exc:
            raise refuse(BAD_OPTION, str(exc)) from None
