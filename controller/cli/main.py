"""``jetfleet``: the operator CLI and the controller server, one click group."""

from __future__ import annotations

import click

from controller.cli.agent import agent
from controller.cli.analyze import analyze
from controller.cli.broker import broker
from controller.cli.configs import configs
from controller.cli.db import db
from controller.cli.demo import demo
from controller.cli.devices import devices, telemetry
from controller.cli.devices_security import (
    enroll_token,
    identities,
    label_device,
    revoke_device,
)
from controller.cli.engines import engines
from controller.cli.keys import keys
from controller.cli.login import login
from controller.cli.models import artifacts, models
from controller.cli.operator import deploy, undeploy
from controller.cli.profile import profile
from controller.cli.rollouts import rollouts
from controller.cli.serve import serve
from controller.cli.tokens import audit, tokens
from controller.cli.tune import jobs, tune


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
    login,
    tokens,
    audit,
    keys,
    agent,
):
    cli.add_command(command)


models.add_command(analyze)
for command in (enroll_token, revoke_device, identities, label_device):
    devices.add_command(command)
cli.add_command(broker)
devices.add_command(profile)
cli.add_command(tune)
cli.add_command(jobs)


def main() -> None:
    """Console-script entry point."""
    cli()
