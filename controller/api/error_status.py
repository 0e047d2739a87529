"""Which HTTP status each controller error answers with, and the headers that go with it.

One table for every route (``create_app`` installs :func:`controller_error_response` as the
handler of :class:`~controller.errors.ControllerError`); the OpenAPI answers per route are in
:mod:`controller.api.answers`. 4xx bodies pass :func:`~controller.api.error_bodies.clip_echoes`.
"""

from __future__ import annotations

from fastapi import Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match, Route

from controller.api.error_bodies import clip_echoes
from controller.artifacts.store import UploadTooLarge
from controller.errors import (
    BusError,
    Conflict,
    ControllerError,
    DatabaseError,
    Forbidden,
    InvalidInput,
    InvalidReference,
    NotFound,
    QuotaExceeded,
    RangeNotSatisfiable,
    ShuttingDown,
    StorageError,
    TooManyNodes,
)

STATUS: list[tuple[type[ControllerError], int]] = [
    (UploadTooLarge, 413),
    (InvalidReference, 422),
    (TooManyNodes, 422),
    (InvalidInput, 400),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (RangeNotSatisfiable, 416),
    (QuotaExceeded, 429),
    (DatabaseError, 503),
    (BusError, 503),
    (StorageError, 503),
    (ShuttingDown, 503),
]
"""The first kind an error is an instance of decides (subclasses before their bases); 500
for any other."""


async def controller_error_response(_request: Request, exc: Exception) -> Response:
    status = next((code for kind, code in STATUS if isinstance(exc, kind)), 500)
    headers = {}
    if isinstance(exc, RangeNotSatisfiable):
        headers["Content-Range"] = f"bytes */{exc.size}"
    if isinstance(exc, QuotaExceeded):
        headers["Retry-After"] = f"{exc.retry_after_s:.0f}"
    detail = str(exc) if status >= 500 else clip_echoes(str(exc))
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


async def allow_every_method(request: Request, exc: Exception) -> Response:
    """Starlette's answer to an HTTP error, with a 405's ``Allow`` naming every method of the
    path: each method is its own route, and Starlette names only the first route's."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        scope = {**request.scope, "method": ""}  # any method: which routes take this path?
        methods = {
            method
            for route in request.app.router.routes
            if isinstance(route, Route) and route.methods and route.matches(scope)[0] != Match.NONE
            for method in route.methods
        }
        exc.headers = {**(exc.headers or {}), "Allow": ", ".join(sorted(methods))}
    return await http_exception_handler(request, exc)
