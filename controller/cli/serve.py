"""``jetfleet serve``: run the controller (HTTP API, MQTT ingest, artifact store).

The command and its options; :mod:`controller.cli.serve_settings` turns them into the settings.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import click

from controller.broker_admin.base import choose_admin
from controller.cli.serve_settings import Security, Size, build_settings, object_store_settings
from controller.errors import ControllerError
from controller.settings import (
    DATA_DIR_ENV,
    DEFAULT_ANALYSIS_TIMEOUT_S,
    DEFAULT_EMBEDDED_BROKER,
    DEFAULT_HTTP,
    DEFAULT_MAX_MODEL_NODES,
    DEFAULT_REFERENCE_TIMEOUT_S,
    S3_ADDRESSING,
    check_replica_id,
    from_environment,
    parse_broker_url,
    parse_trusted_proxy,
)
from shared.topics import DEFAULT_PREFIX

_READABLE = click.Path(exists=True, dir_okay=False, readable=True, path_type=Path)


@click.command("serve")
@click.option(
    "--db", "db_url", metavar="URL", help="SQLAlchemy URL [default: SQLite in the data dir]."
)
@click.option(
    "--broker",
    "broker_url",
    metavar="URL",
    help="External broker mqtt://host:port, or mqtts://host:port for TLS "
    "[default: start the embedded broker].",
)
@click.option(
    "--http",
    "http",
    default=f"{DEFAULT_HTTP[0]}:{DEFAULT_HTTP[1]}",
    show_default=True,
    metavar="HOST:PORT",
    help="Where the HTTP API listens (port 0: a free one).",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=DATA_DIR_ENV,
    help=f"Artifacts and the default SQLite file [default: ${DATA_DIR_ENV} or ./.jetfleet].",
)
@click.option("--auto-migrate", is_flag=True, help="Upgrade the database schema at start.")
@click.option(
    "--embedded-broker",
    "embedded",
    default=f"{DEFAULT_EMBEDDED_BROKER[0]}:{DEFAULT_EMBEDDED_BROKER[1]}",
    show_default=True,
    metavar="HOST:PORT",
    help="Where the embedded broker listens when --broker is not given (port 0: a free one).",
)
@click.option(
    "--public-url",
    metavar="URL",
    help="Base URL agents download artifacts from [default: http(s)://<http host>:<port>].",
)
@click.option(
    "--topic-prefix", default=DEFAULT_PREFIX, show_default=True, help="MQTT topic prefix."
)
@click.option("--tls-cert", type=_READABLE, help="Serve HTTPS with this PEM certificate.")
@click.option("--tls-key", type=_READABLE, help="PEM private key of --tls-cert.")
@click.option(
    "--broker-ca",
    type=_READABLE,
    help="CA bundle that signed the mqtts:// broker's certificate [default: system CAs].",
)
@click.option("--broker-cert", type=_READABLE, help="Client certificate for the broker (PEM).")
@click.option("--broker-key", type=_READABLE, help="PEM private key of --broker-cert.")
@click.option("--broker-user", metavar="NAME", help="The controller's broker user name.")
@click.option(
    "--broker-password-file",
    type=_READABLE,
    help="File holding the broker password of --broker-user (first line).",
)
@click.option(
    "--max-upload",
    type=Size(),
    default="2G",
    show_default=True,
    help="Largest model/artifact/reference upload; larger ones get HTTP 413.",
)
@click.option(
    "--max-mqtt-payload",
    type=Size(),
    default="1M",
    show_default=True,
    help="Larger MQTT messages from agents are dropped undecoded (counted as rejected).",
)
@click.option(
    "--max-model-nodes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_MODEL_NODES,
    show_default=True,
    help="Models with more nodes (subgraphs included) are refused with HTTP 422; large vision "
    "exports (ResNet, YOLO, ViT) have up to ~20k.",
)
@click.option(
    "--analysis-timeout",
    "analysis_timeout_s",
    type=click.FloatRange(min=1.0),
    default=DEFAULT_ANALYSIS_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="A pushed model's static analysis (run in the background) that takes longer is "
    "stopped and recorded as failed.",
)
@click.option(
    "--reference-timeout",
    "reference_timeout_s",
    type=click.FloatRange(min=1.0),
    default=DEFAULT_REFERENCE_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="Running a pushed model for its reference outputs (during the push) that takes longer "
    "is stopped; the version is stored without them (push your own with --reference).",
)
@click.option(
    "--broker-admin",
    type=click.Choice(["auto", "none", "dynsec", "embedded"]),
    default="auto",
    show_default=True,
    help="Who keeps device broker credentials and topic ACLs: embedded = the embedded broker "
    "(anonymous clients refused), dynsec = Mosquitto's dynamic security plugin (with "
    "--broker-user/--broker-password-file, see `jetfleet broker config`), none = an anonymous "
    "broker; auto = embedded without --broker, none with it.",
)
@click.option(
    "--public-broker-url",
    metavar="URL",
    help="Broker URL enrolling devices are given [default: the one the controller uses].",
)
@click.option(
    "--replica-id",
    envvar="JETFLEET_REPLICA_ID",
    default=None,
    help="This replica's stable name, unique among the fleet's replicas (e.g. ctl-1): its "
    "telemetry sessions on the broker keep this name across restarts, and replicas with one "
    "split telemetry through a shared subscription. Default: host name and HTTP port.",
)
@click.option(
    "--ingest-workers",
    type=click.IntRange(0, 64),
    default=0,
    show_default=True,
    help="Processes that store telemetry, fed by an MQTT shared subscription (needs --broker "
    "with Mosquitto); 0 ingests in the controller process.",
)
@click.option(
    "--insecure-no-auth",
    is_flag=True,
    help="Serve the API without tokens: anyone who reaches it can change the fleet.",
)
@click.option(
    "--trusted-proxy",
    "trusted_proxies",
    multiple=True,
    metavar="IP_OR_CIDR",
    help="A reverse proxy whose X-Forwarded-For names the client for enrolment rate limits "
    "and the audit log (repeat for several) [default: none; the header is ignored].",
)
@click.option(
    "--artifact-store",
    metavar="URL",
    envvar="JETFLEET_ARTIFACT_STORE",
    help="s3://BUCKET[/PREFIX]: artifacts and engines in an S3-compatible bucket, for replicas "
    "that share no disk; credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE "
    "[default: the data directory].",
)
@click.option(
    "--s3-endpoint",
    metavar="URL",
    help="URL of the S3-compatible server, e.g. http://10.0.0.9:8333 "
    "[default: $AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL, else AWS].",
)
@click.option(
    "--s3-region",
    metavar="NAME",
    help="The bucket's region [default: $AWS_REGION or the profile's, else us-east-1].",
)
@click.option(
    "--s3-addressing",
    type=click.Choice(S3_ADDRESSING),
    default="auto",
    show_default=True,
    help="Bucket in the URL path (most self-hosted servers) or in the host name (AWS).",
)
@click.option(
    "--artifact-cache",
    "artifact_cache",
    type=Size(),
    default="8G",
    show_default=True,
    help="With --artifact-store: bound of the local copies kept in <data-dir>/artifact-cache.",
)
@click.option(
    "--artifact-redirect",
    "artifact_redirect_s",
    type=click.IntRange(0, 7 * 24 * 3600),
    default=0,
    show_default=True,
    metavar="SECONDS",
    help="With --artifact-store: answer artifact downloads with a redirect to a presigned URL "
    "valid this long (agents must reach the S3 endpoint); 0: the controller streams them.",
)
def serve(
    db_url: str | None,
    broker_url: str | None,
    http: str,
    data_dir: Path | None,
    auto_migrate: bool,
    embedded: str,
    public_url: str | None,
    topic_prefix: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    broker_ca: Path | None,
    broker_cert: Path | None,
    broker_key: Path | None,
    broker_user: str | None,
    broker_password_file: Path | None,
    max_upload: int,
    max_mqtt_payload: int,
    max_model_nodes: int,
    analysis_timeout_s: float,
    reference_timeout_s: float,
    broker_admin: str,
    public_broker_url: str | None,
    replica_id: str | None,
    ingest_workers: int,
    insecure_no_auth: bool,
    trusted_proxies: tuple[str, ...],
    artifact_store: str | None,
    s3_endpoint: str | None,
    s3_region: str | None,
    s3_addressing: str,
    artifact_cache: int,
    artifact_redirect_s: int,
) -> None:
    """Run the controller until Ctrl-C (SIGINT) or SIGTERM."""
    from controller.server import run

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("amqtt", "transitions", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        security = Security(
            tls_cert=tls_cert,
            tls_key=tls_key,
            broker_ca=broker_ca,
            broker_cert=broker_cert,
            broker_key=broker_key,
            broker_user=broker_user,
            broker_password_file=broker_password_file,
            max_upload=max_upload,
            max_mqtt_payload=max_mqtt_payload,
        )
        settings = build_settings(
            db_url,
            broker_url,
            http,
            data_dir,
            auto_migrate,
            embedded,
            public_url,
            topic_prefix,
            security,
        )
        if insecure_no_auth:
            settings = dataclasses.replace(settings, auth_required=False)
        if public_broker_url is not None:
            parse_broker_url(public_broker_url)
        settings = dataclasses.replace(
            settings,
            broker_admin=choose_admin(broker_admin, broker_url is not None),
            public_broker_url=public_broker_url,
            ingest_workers=ingest_workers,
            replica_id=check_replica_id(replica_id) if replica_id else None,
            max_model_nodes=max_model_nodes,
            analysis_timeout_s=analysis_timeout_s,
            reference_timeout_s=reference_timeout_s,
            trusted_proxies=tuple(parse_trusted_proxy(p) for p in trusted_proxies),
            object_store=object_store_settings(
                artifact_store,
                s3_endpoint,
                s3_region,
                s3_addressing,
                artifact_cache,
                artifact_redirect_s,
            ),
        )
        settings = from_environment(settings, os.environ)
        run(settings)
    except ControllerError as exc:
        raise click.ClickException(str(exc)) from exc
