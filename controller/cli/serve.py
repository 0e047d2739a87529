"""Placeholder: being written."""

import click


@click.command("serve")
def serve() -> None:
    """Not yet."""
    raise click.ClickException("not implemented yet")
