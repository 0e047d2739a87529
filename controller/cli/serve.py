"""``jetfleet serve``: run the controller (HTTP API, MQTT ingest, artifact store).

Its options are made from :class:`~controller.settings.ServeOptions` (controller/settings/
serve_fields.py: one field per option, with its environment variable, default, help and checks)
by :mod:`controller.cli.serve_options`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

import click

from controller.broker_admin.base import choose_admin
from controller.cli.serve_options import as_click_error, given_options, serve_options
from controller.errors import ControllerError
from controller.settings import ServeOptions, from_environment


@click.command("serve")
@serve_options
@click.pass_context
def serve(ctx: click.Context, /, **values: Any) -> None:
    """Run the controller until Ctrl-C (SIGINT) or SIGTERM."""
    from controller.server import run

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("amqtt", "transitions", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        options = ServeOptions.from_sources(given_options(ctx, values), os.environ)
        settings = dataclasses.replace(
            options.resolve(),
            broker_admin=choose_admin(options.broker_admin, options.broker_url is not None),
        )
        settings = from_environment(settings, os.environ)
    except ControllerError as exc:
        raise as_click_error(exc) from exc
    try:
        run(settings)
    except ControllerError as exc:
        raise click.ClickException(str(exc)) from exc
