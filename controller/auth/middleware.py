"""The ASGI middleware that enforces the policy on every request and writes the audit log.

It runs before routing, so every route is covered, including routers added later: the token
comes from ``Authorization: Bearer`` (or, for GET/HEAD only, the dashboard's login cookie), the
policy decides, the principal goes on ``request.state.principal``. A device token's manifest and
lease requests are read first (small JSON bodies) to check they name the token's own device.
Each mutating request gets one audit row, written when its status is known and before the
response leaves, so a client that sees the answer can already read the row.

While the database cannot be reached (PostgreSQL restarting, say), a token cannot be
checked: the request is answered 503 with ``Retry-After`` (agents and the CLI retry 5xx), one
WARNING line per :data:`UNAVAILABLE_LOG_EVERY_S` (before: an unhandled exception, a 500 and a
traceback per request).
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime
from typing import Any
from urllib.parse import quote

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controller.auth.policy import SAFE_METHODS, authorize, bound_device, required_role
from controller.auth.service import AccessControl, Unauthenticated
from controller.auth.tokens import ANONYMOUS_ADMIN, Principal
from controller.db.token_store import AuditRecord
from controller.errors import DatabaseError

log = logging.getLogger(__name__)

COOKIE = "jetfleet_token"
MAX_BOUND_BODY = 1 << 20
"""Largest body read to check a device's own id (manifests and lease requests are ~1 KiB)."""
_HOW_TO_AUTHENTICATE = "this request needs an API token (header 'Authorization: Bearer <token>')"
UNAVAILABLE_LOG_EVERY_S = 10.0
"""At most one line this often about requests refused while the database is unavailable."""
RETRY_AFTER_S = 5


def bearer_token(scope: Scope) -> str | None:
    """The token of ``Authorization: Bearer``, or for GET/HEAD the login cookie."""
    headers: dict[str, str] = {
        k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
    }
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if scope["method"] in ("GET", "HEAD"):
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and value:
                return value
    return None


class AuthMiddleware:
    """Authenticate, authorize and audit (see the module docstring)."""

    def __init__(self, app: ASGIApp, access: AccessControl) -> None:
        self.app = app
        self.access = access
        self._unavailable_logged = -UNAVAILABLE_LOG_EVERY_S
        self._unavailable_since_log = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method: str = scope["method"]
        path: str = scope["path"]
        needed = required_role(method, path)
        principal: Principal | None = None
        if not self.access.required:
            principal = ANONYMOUS_ADMIN
        elif needed is not None:
            token = bearer_token(scope)
            if token is None:
                await self._deny(scope, send, 401, _HOW_TO_AUTHENTICATE, None)
                return
            try:
                principal = await anyio.to_thread.run_sync(self.access.authenticate, token)
            except Unauthenticated as exc:
                await self._deny(scope, send, 401, str(exc), None)
                return
            except DatabaseError as exc:
                await self._unavailable(scope, send, exc)
                return
            decision = authorize(principal.role, method, path, principal.name)
            if not decision.allowed:
                await self._deny(scope, send, 403, decision.reason, principal)
                return
            if decision.binding is not None:
                body, too_big = await _read_body(receive, MAX_BOUND_BODY)
                if too_big:
                    await self._deny(scope, send, 413, "request body too large", principal)
                    return
                query = scope.get("query_string", b"").decode("latin-1")
                named = bound_device(decision.binding, query, body)
                if named != principal.device_id:
                    reason = (
                        f"device token {principal.name!r} speaks for device "
                        f"{principal.device_id!r}, not {named!r}"
                    )
                    await self._deny(scope, send, 403, reason, principal)
                    return
                receive = _replay(body, receive)
        if principal is not None:
            scope.setdefault("state", {})["principal"] = principal
        if method in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        await self._audited(scope, receive, send, principal)

    async def _audited(
        self, scope: Scope, receive: Receive, send: Send, principal: Principal | None
    ) -> None:
        started = False

        async def send_audited(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start" and not started:
                started = True
                await self._audit(scope, principal, int(message["status"]), _route_detail(scope))
            await send(message)

        try:
            await self.app(scope, receive, send_audited)
        except Exception:
            if not started:
                await self._audit(scope, principal, 500, {"error": "unhandled exception"})
            raise

    async def _deny(
        self, scope: Scope, send: Send, status: int, reason: str, principal: Principal | None
    ) -> None:
        if scope["method"] not in SAFE_METHODS:
            await self._audit(scope, principal, status, {"reason": reason})
        if status == 401 and scope["method"] == "GET" and _is_page(scope["path"]):
            await _redirect_to_login(scope, send)
            return
        headers = [(b"content-type", b"application/json")]
        if status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="jetfleet"'))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": json.dumps({"detail": reason}).encode()})

    async def _unavailable(self, scope: Scope, send: Send, exc: DatabaseError) -> None:
        """503 for a request whose token cannot be checked now (no audit row: no database)."""
        now = time.monotonic()
        self._unavailable_since_log += 1
        if now - self._unavailable_logged >= UNAVAILABLE_LOG_EVERY_S:
            more = self._unavailable_since_log - 1
            log.warning(
                "answered 503 to %s %s: cannot check its API token: %s%s",
                scope["method"],
                scope["path"],
                exc,
                f" ({more} more such requests since the last line)" if more else "",
            )
            self._unavailable_logged, self._unavailable_since_log = now, 0
        body = {"detail": f"the controller's database is unavailable ({exc}); try again"}
        headers = [
            (b"content-type", b"application/json"),
            (b"retry-after", str(RETRY_AFTER_S).encode()),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    async def _audit(
        self, scope: Scope, principal: Principal | None, status: int, detail: dict[str, Any]
    ) -> None:
        entry = audit_entry(scope, principal, status, detail, self.access.now())
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.access.record, entry)


def _route_detail(scope: Scope) -> dict[str, Any]:
    """What the route said of its request for the audit log (``request.state.audit_detail``:
    e.g. the version and architecture of a pushed agent release)."""
    detail = (scope.get("state") or {}).get("audit_detail")
    return dict(detail) if isinstance(detail, dict) else {}


def audit_entry(
    scope: Scope,
    principal: Principal | None,
    status: int,
    detail: dict[str, Any],
    now: datetime,
) -> AuditRecord:
    """The audit row of one request: action ``METHOD /route/{template}``, target its params."""
    template = route_template(scope)
    params = scope.get("path_params") or {}
    target = " ".join(f"{k}={v}" for k, v in params.items()) or None
    extra: dict[str, Any] = dict(detail)
    client = scope.get("client")
    if client:
        extra["client"] = client[0]
    query = scope.get("query_string", b"").decode("latin-1")
    if query:
        extra["query"] = query[:200]
    if principal is not None and principal.device_id:
        extra["device"] = principal.device_id
    if principal is not None and principal.token_id:
        extra["token"] = principal.token_id
    return AuditRecord(
        at=now,
        actor=principal.name if principal else "anonymous",
        role=principal.role.value if principal else "none",
        action=f"{scope['method']} {template}",
        target=target,
        status=status,
        detail=extra,
    )


def route_template(scope: Scope) -> str:
    """The matched route's path template with its router prefix (``/api/v1/models/{name}``),
    or the raw path when no route matched; included routers may store only their own part."""
    path: str = scope["path"]
    template = getattr(scope.get("route"), "path", None)
    if not isinstance(template, str) or not template or ":path}" in template:
        return path
    if path.endswith("/") and not template.endswith("/"):
        path = path.rstrip("/")
    own = template.strip("/").split("/") if template.strip("/") else []
    raw = path.strip("/").split("/") if path.strip("/") else []
    if len(own) > len(raw):
        return path
    prefix = raw[: len(raw) - len(own)]
    return "/" + "/".join([*prefix, *own])


def _is_page(path: str) -> bool:
    return path == "/dashboard" or (
        path.startswith("/dashboard/") and not path.startswith("/dashboard/static/")
    )


async def _redirect_to_login(scope: Scope, send: Send) -> None:
    here = scope["path"]
    query = scope.get("query_string", b"").decode("latin-1")
    if query:
        here += "?" + query
    location = "/login?next=" + quote(here, safe="")
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", location.encode("latin-1")), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """The whole request body (up to ``limit``; True when it was larger)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return b"", True
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks), False


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the already-read body, then defers to the real one."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
