"""Placeholder: being written."""

import click


@click.command("demo")
def demo() -> None:
    """Not yet."""
    raise click.ClickException("not implemented yet")
