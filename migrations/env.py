"""Alembic environment: migrations run online against the URL set by controller.db.migrate."""

from __future__ import annotations

from alembic import context

from controller.db.schema import Base
from controller.db.session import make_engine

target_metadata = Base.metadata


def run_migrations_online() -> None:
    """Run the pending migrations in one transaction per database connection."""
    url = context.config.get_main_option("sqlalchemy.url")
    if url is None:
        raise RuntimeError("sqlalchemy.url is not set: run through `jetfleet db upgrade`")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=connection.dialect.name == "sqlite",
                compare_type=True,
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported")
run_migrations_online()
