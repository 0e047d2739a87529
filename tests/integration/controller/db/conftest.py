"""A migrated database (SQLite or the real PostgreSQL) per test, through the real migrations."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from controller.db import migrate
from controller.db.session import make_engine


def migrated(url: str) -> Engine:
    """An engine on ``url`` after the real migrations ran (the caller disposes of it)."""
    migrate.upgrade(url)
    return make_engine(url)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    made = migrated(db_url)
    yield made
    made.dispose()


@pytest.fixture
def pg_engine(postgres_url: str) -> Iterator[Engine]:
    made = migrated(postgres_url)
    yield made
    made.dispose()
