"""``jetfleet serve``: run the controller (HTTP API, MQTT ingest, artifact store)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from controller.errors import ControllerError
from controller.settings import (
    DATA_DIR_ENV,
    DEFAULT_EMBEDDED_BROKER,
    DEFAULT_HTTP,
    Settings,
    default_data_dir,
    default_db_url,
    parse_broker_url,
    parse_host_port,
)
from shared.topics import DEFAULT_PREFIX, TopicError, Topics


@click.command("serve")
@click.option(
    "--db", "db_url", metavar="URL", help="SQLAlchemy URL [default: SQLite in the data dir]."
)
@click.option(
    "--broker",
    "broker_url",
    metavar="URL",
    help="External broker mqtt://host:port [default: start the embedded broker].",
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
    help="Base URL agents download artifacts from [default: http://<http host>:<port>].",
)
@click.option(
    "--topic-prefix", default=DEFAULT_PREFIX, show_default=True, help="MQTT topic prefix."
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
) -> None:
    """Run the controller until Ctrl-C (SIGINT) or SIGTERM."""
    from controller.server import run

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("amqtt", "transitions", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        settings = _settings(
            db_url, broker_url, http, data_dir, auto_migrate, embedded, public_url, topic_prefix
        )
        run(settings)
    except ControllerError as exc:
        raise click.ClickException(str(exc)) from exc


def _settings(
    db_url: str | None,
    broker_url: str | None,
    http: str,
    data_dir: Path | None,
    auto_migrate: bool,
    embedded: str,
    public_url: str | None,
    topic_prefix: str,
) -> Settings:
    data = data_dir or default_data_dir()
    http_host, http_port = parse_host_port(http, "--http")
    broker_host, broker_port = parse_host_port(embedded, "--embedded-broker")
    if broker_url is not None:
        parse_broker_url(broker_url)
    try:
        Topics(topic_prefix)
    except TopicError as exc:
        raise click.BadParameter(str(exc), param_hint="--topic-prefix") from exc
    return Settings(
        db_url=db_url or default_db_url(data),
        broker_url=broker_url,
        data_dir=data,
        http_host=http_host,
        http_port=http_port,
        embedded_broker_host=broker_host,
        embedded_broker_port=broker_port,
        public_url=public_url,
        topic_prefix=topic_prefix,
        auto_migrate=auto_migrate,
    )
