"""Placeholder: being written."""

import click


@click.command("db")
def db() -> None:
    """Not yet."""
    raise click.ClickException("not implemented yet")
