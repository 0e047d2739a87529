"""Placeholder: being written."""

import click


@click.group()
def models() -> None:
    """Not yet."""


@click.group()
def devices() -> None:
    """Not yet."""


@click.command()
def deploy() -> None:
    """Not yet."""


@click.command()
def undeploy() -> None:
    """Not yet."""


@click.command()
def telemetry() -> None:
    """Not yet."""
