"""``jetfleet broker config``: write the Mosquitto configuration Jetfleet's ACLs need."""

from __future__ import annotations

from pathlib import Path

import click

from controller.broker_admin.mosquitto_config import (
    DEFAULT_MAX_PACKET_BYTES,
    DYNSEC_NAME,
    BrokerConfig,
    find_dynsec_plugin,
    write_broker_config,
)
from controller.cli.render import emit_json
from controller.errors import ControllerError
from controller.settings import parse_host_port
from shared.topics import DEFAULT_PREFIX, TopicError, Topics

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.group()
def broker() -> None:
    """The MQTT broker: configuration for Mosquitto with per-device ACLs."""


@broker.command("config")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for mosquitto.conf, dynamic-security.json and controller-password.",
)
@click.option(
    "--controller-user",
    default="jetfleet-controller",
    show_default=True,
    help="The controller's broker user name (gets the admin and ingest rights).",
)
@click.option(
    "--listener",
    default="0.0.0.0:1883",
    show_default=True,
    metavar="HOST:PORT",
    help="Plain MQTT listener.",
)
@click.option("--tls-cert", type=_FILE, help="Server certificate (PEM): adds a TLS listener.")
@click.option("--tls-key", type=_FILE, help="Private key of --tls-cert.")
@click.option("--tls-ca", type=_FILE, help="CA of client certificates (optional).")
@click.option(
    "--tls-listener",
    default="0.0.0.0:8883",
    show_default=True,
    metavar="HOST:PORT",
    help="Where the TLS listener binds (with --tls-cert).",
)
@click.option(
    "--topic-prefix", default=DEFAULT_PREFIX, show_default=True, help="MQTT topic prefix."
)
@click.option(
    "--dynsec-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"Where Mosquitto keeps its dynamic security file [default: OUT/{DYNSEC_NAME}]; "
    "Mosquitto rewrites it at every change, so its directory must be writable by Mosquitto.",
)
@click.option(
    "--plugin",
    "plugin_path",
    type=_FILE,
    help="mosquitto_dynamic_security.so [default: found under /usr/lib].",
)
@click.option(
    "--max-packet-size",
    default=DEFAULT_MAX_PACKET_BYTES,
    show_default=True,
    type=int,
    help="Largest MQTT packet Mosquitto accepts (bytes); larger ones disconnect the client.",
)
@click.option("--user", "run_as_user", help="User Mosquitto runs as when started as root.")
@click.option("--force", is_flag=True, help="Overwrite an existing dynamic security file.")
@click.option("--json", "as_json", is_flag=True, help="Print the written paths as JSON.")
def broker_config(
    out_dir: Path,
    controller_user: str,
    listener: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    tls_ca: Path | None,
    tls_listener: str,
    topic_prefix: str,
    dynsec_file: Path | None,
    plugin_path: Path | None,
    max_packet_size: int,
    run_as_user: str | None,
    force: bool,
    as_json: bool,
) -> None:
    """Write mosquitto.conf and the initial dynamic security file (controller client, its
    role, the device role; everything else denied) and the controller's password (0600)."""
    try:
        Topics(topic_prefix)
    except TopicError as exc:
        raise click.BadParameter(str(exc), param_hint="--topic-prefix") from exc
    plugin = plugin_path or find_dynsec_plugin()
    if plugin is None:
        raise click.ClickException(
            "Mosquitto's dynamic security plugin (mosquitto_dynamic_security.so) is not "
            "installed: install Mosquitto 2.0 (Debian: apt install mosquitto) or give --plugin"
        )
    try:
        config = BrokerConfig(
            controller_user=controller_user,
            plugin_path=plugin.resolve(),
            dynsec_file=(dynsec_file or out_dir / DYNSEC_NAME).resolve(),
            topic_prefix=topic_prefix,
            listener=parse_host_port(listener, "--listener"),
            tls_listener=parse_host_port(tls_listener, "--tls-listener") if tls_cert else None,
            tls_cert=tls_cert.resolve() if tls_cert else None,
            tls_key=tls_key.resolve() if tls_key else None,
            tls_ca=tls_ca.resolve() if tls_ca else None,
            max_packet_bytes=max_packet_size,
            run_as_user=run_as_user,
        )
        written = write_broker_config(out_dir, config, force=force)
    except ControllerError as exc:
        raise click.ClickException(str(exc)) from exc
    except OSError as exc:
        raise click.ClickException(f"cannot write to {out_dir}: {exc.strerror}") from exc
    host, port = config.listener
    serve = (
        f"jetfleet serve --broker mqtt://{'127.0.0.1' if host == '0.0.0.0' else host}:{port} "
        f"--broker-admin dynsec --broker-user {controller_user} "
        f"--broker-password-file {written.password_file}"
    )
    if as_json:
        emit_json(
            {
                "conf_file": str(written.conf_file),
                "dynsec_file": str(written.dynsec_file),
                "password_file": str(written.password_file),
                "controller_user": controller_user,
                "serve": serve,
            }
        )
        return
    click.echo(f"wrote {written.conf_file}")
    click.echo(f"wrote {written.dynsec_file} (0600; Mosquitto must be able to rewrite it)")
    click.echo(f"wrote {written.password_file} (0600): the controller's broker password")
    click.echo(f"start Mosquitto: mosquitto -c {written.conf_file}")
    click.echo(f"then the controller: {serve}")
