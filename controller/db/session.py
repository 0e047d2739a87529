"""Engines and sessions: the only place that creates a SQLAlchemy engine."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    IntegrityError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeoutError
from sqlalchemy.orm import Session, sessionmaker

from controller.errors import DatabaseError, InvalidInput


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL, cross-thread use and foreign keys."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise InvalidInput(f"invalid database URL {url!r}: {exc}") from exc
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            parsed, connect_args={"check_same_thread": False, "timeout": 30}, future=True
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(parsed, pool_pre_ping=True, future=True)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
    finally:
        cursor.close()


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sessions bound to ``engine``; objects stay readable after commit."""
    return sessionmaker(engine, expire_on_commit=False)


def redact(url: str) -> str:
    """``url`` with any password hidden, for logs and /healthz."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<invalid database URL>"


def describe(exc: Exception) -> str:
    """One line saying what went wrong, without SQLAlchemy's wrapping and background links
    (a driver's own error, e.g. psycopg's, is described the same way)."""
    original = getattr(exc, "orig", None) or exc
    lines = [line.strip() for line in str(original).splitlines() if line.strip()]
    return f"{type(original).__name__}: {lines[0] if lines else 'no details'}"


_SQLITE_BUSY = ("database is locked", "database table is locked", "disk i/o error")


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` (a :class:`DatabaseError` raised from a driver error, or that error)
    says the database cannot take work right now rather than that it refuses this work: a
    connection refused, cut or invalidated, a server shutting down or starting up, out of
    connections, a pool timeout, a deadlock or a lock timeout, a busy SQLite file. The same
    write may succeed later. A refusal of the data (a constraint, a value out of range, a
    missing table) is not this."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(current, (DisconnectionError, SQLAlchemyTimeoutError)):
            return True
        if isinstance(current, psycopg.OperationalError):
            return True  # SQLSTATE classes 08, 40, 53, 55, 57, 58 and psycopg's own failures
        if isinstance(current, sqlite3.OperationalError):
            return any(s in str(current).lower() for s in _SQLITE_BUSY)
        orig = getattr(current, "orig", None)
        current = (
            orig if isinstance(orig, BaseException) else (current.__cause__ or current.__context__)
        )
    return False


@contextmanager
def transaction(sessions: sessionmaker[Session]) -> Iterator[Session]:
    """One transaction; SQLAlchemy errors other than IntegrityError become DatabaseError."""
    try:
        with sessions.begin() as session:
            yield session
    except IntegrityError:
        raise
    except SQLAlchemyError as exc:
        raise DatabaseError(f"database error: {describe(exc)}") from exc


T = TypeVar("T")

RACE_RETRIES = 5
"""How many times :meth:`SessionStore._tx_retried` runs a transaction that lost an insert race."""

IN_CHUNK = 1000
"""Ids per ``IN (...)`` list (SQLite allows 32,766 parameters, PostgreSQL 65,535)."""


def in_chunks(ids: Sequence[str]) -> list[list[str]]:
    """``ids`` in lists of at most :data:`IN_CHUNK`, in order."""
    return [list(ids[i : i + IN_CHUNK]) for i in range(0, len(ids), IN_CHUNK)]


class SessionStore:
    """Base of the database stores: ``self._tx()`` is one transaction; methods return records.

    Subclasses keep one method per operation and return frozen records, never ORM rows.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sessions = make_sessionmaker(engine)
        self._sqlite = engine.dialect.name == "sqlite"

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        with transaction(self._sessions) as session:
            yield session

    def _tx_retried(self, work: Callable[[Session], T], failure: str) -> T:
        """``work(session)`` in one transaction, run again in a new one when it lost a race to
        insert the same row (IntegrityError: it then decides against the winner's row), at most
        :data:`RACE_RETRIES` times in all; then :class:`DatabaseError` saying ``failure``."""
        for _ in range(RACE_RETRIES):
            try:
                with self._tx() as session:
                    return work(session)
            except IntegrityError:
                continue
        raise DatabaseError(failure)
