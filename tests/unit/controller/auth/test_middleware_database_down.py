"""A request whose token cannot be checked because the database is unavailable (PostgreSQL
restarting) is answered 503 with Retry-After, in one log line, instead of escaping the
middleware as an unhandled exception (a 500 and a traceback per request)."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest

from controller.auth.middleware import AuthMiddleware
from controller.auth.service import AccessControl
from controller.auth.tokens import mint
from controller.db.token_store import TokenStore
from controller.errors import DatabaseError


class DownStore(TokenStore):
    """A token store whose database is down."""

    def __init__(self) -> None:  # no engine: every call fails like a refused connection
        pass

    def get(self, token_id: str) -> Any:
        raise DatabaseError("database error: OperationalError: connection refused")


async def never_called(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("the app must not run without an authenticated principal")


def request(method: str, path: str, token: str) -> tuple[int, dict[str, str], dict[str, Any]]:
    middleware = AuthMiddleware(never_called, AccessControl(DownStore()))
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(b"authorization", f"Bearer {token}".encode())],
        "query_string": b"",
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    anyio.run(middleware, scope, receive, send)
    start, body = sent
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return int(start["status"]), headers, json.loads(body["body"])


def test_a_token_that_cannot_be_checked_is_answered_503_with_retry_after(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = mint().wire
    status, headers, body = request("GET", "/api/v1/devices", token)
    assert status == 503
    assert headers["retry-after"] == "5"
    assert "database is unavailable" in body["detail"]
    status, _, _ = request("POST", "/api/v1/deployments", token)
    assert status == 503
    lines = [r for r in caplog.records if r.name == "controller.auth.middleware"]
    assert lines
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in lines)
