"""``jetfleet db``: manage the controller's database schema."""

from __future__ import annotations

from pathlib import Path

import click

from controller.errors import ControllerError
from controller.settings import DATA_DIR_ENV, default_data_dir, default_db_url


@click.group("db")
def db() -> None:
    """Manage the controller's database."""


@db.command("upgrade")
@click.option(
    "--db", "db_url", metavar="URL", help="SQLAlchemy URL [default: SQLite in the data dir]."
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=DATA_DIR_ENV,
    help=f"Where the default SQLite file lives [default: ${DATA_DIR_ENV} or ./.jetfleet].",
)
def upgrade(db_url: str | None, data_dir: Path | None) -> None:
    """Bring the database to the newest schema (safe to run again)."""
    from controller.db import migrate
    from controller.db.session import redact

    url = db_url or default_db_url(data_dir or default_data_dir())
    try:
        before = migrate.current_revision(url)
        migrate.upgrade(url)
        after = migrate.current_revision(url)
    except ControllerError as exc:
        raise click.ClickException(str(exc)) from exc
    if before == after:
        click.echo(f"database {redact(url)} is up to date (revision {after})")
    else:
        click.echo(f"database {redact(url)} upgraded from {before or 'empty'} to {after}")
