"""Alembic, driven from code: the schema migrations ship inside the wheel, no alembic.ini needed."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.exc import SQLAlchemyError

import controller
from controller.db.session import describe, make_engine, redact
from controller.errors import DatabaseError


def migrations_dir() -> Path:
    """The packaged ``controller/_migrations`` in a wheel, else the checkout's ``migrations/``."""
    packaged = Path(controller.__file__).parent / "_migrations"
    if packaged.is_dir():
        return packaged
    return Path(controller.__file__).resolve().parent.parent / "migrations"


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at the migrations and ``url``."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head_revision() -> str | None:
    """The newest migration this controller knows."""
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def current_revision(url: str) -> str | None:
    """The revision the database at ``url`` is at (None: never migrated)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    except SQLAlchemyError as exc:
        raise DatabaseError(f"cannot read database {redact(url)}: {describe(exc)}") from exc
    finally:
        engine.dispose()


def is_up_to_date(url: str) -> bool:
    """True when the database at ``url`` is at the newest migration."""
    return current_revision(url) == head_revision()


def upgrade(url: str) -> None:
    """Bring the database at ``url`` to the newest migration."""
    try:
        command.upgrade(alembic_config(url), "head")
    except SQLAlchemyError as exc:
        raise DatabaseError(f"cannot migrate database {redact(url)}: {describe(exc)}") from exc
