"""``jetfleet``: the operator CLI and the controller server, one click group."""

from __future__ import annotations

import click

from controller.cli.analyze import analyze
from controller.cli.configs import configs
from controller.cli.db import db
from controller.cli.demo import demo
from controller.cli.engines import engines
from controller.cli.operator import artifacts, deploy, devices, models, telemetry, undeploy
from controller.cli.rollouts import rollouts
from controller.cli.serve import serve


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="jetfleet")
def cli() -> None:
    """Jetfleet: fleet manager for NVIDIA edge gateways."""


for command in (
    serve,
    db,
    models,
    devices,
    deploy,
    undeploy,
    telemetry,
    configs,
    engines,
    rollouts,
    artifacts,
    demo,
):
    cli.add_command(command)


models.add_command(analyze)


def main() -> None:
    """Console-script entry point."""
    cli()
