"""Which database errors mean "the database cannot take work now" (the same write may succeed
later: ingest holds it) and which refuse the data (ingest drops it, counted)."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from controller.db.session import unavailable
from controller.errors import DatabaseError


def raised_from(cause: BaseException) -> DatabaseError:
    try:
        raise DatabaseError(f"cannot store a telemetry batch: {cause}") from cause
    except DatabaseError as exc:
        return exc


@pytest.mark.parametrize(
    "cause",
    [
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.errors.CannotConnectNow("the database system is starting up"),
        psycopg.OperationalError("connection failed: Connection refused"),
        OperationalError("SELECT 1", {}, psycopg.OperationalError("server closed the connection")),
        OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked")),
    ],
)
def test_a_lost_or_refused_connection_is_unavailable(cause: BaseException) -> None:
    assert unavailable(raised_from(cause))


@pytest.mark.parametrize(
    "cause",
    [
        psycopg.errors.NumericValueOutOfRange("integer out of range"),
        IntegrityError("INSERT", {}, psycopg.errors.UniqueViolation("duplicate key")),
        OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: devices")),
        ValueError("not a database error"),
    ],
)
def test_a_refusal_of_the_data_is_not(cause: BaseException) -> None:
    assert not unavailable(raised_from(cause))
