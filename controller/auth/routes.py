"""``/api/v1/tokens`` (admin), ``/api/v1/audit`` (admin) and ``/api/v1/whoami`` (any token)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from controller.auth.policy import ROLES
from controller.auth.service import AccessControl
from controller.auth.tokens import ANONYMOUS_ADMIN, NAME_PATTERN, Principal
from shared.timestamps import Timestamp
from shared.topics import DEVICE_ID_PATTERN

MAX_LIFETIME_S = 100 * 365 * 86400
"""The longest ``expires_in_s`` a token may be given (a longer one is a never-expiring one)."""


class TokenIn(BaseModel):
    """POST /api/v1/tokens."""

    model_config = ConfigDict(
        extra="forbid",
        # a device token names its device; no other token names one
        json_schema_extra={
            "anyOf": [
                {
                    "properties": {"role": {"const": "device"}, "device_id": {"type": "string"}},
                    "required": ["role", "device_id"],
                },
                {
                    "properties": {
                        "role": {"enum": [r for r in ROLES if r != "device"]},
                        "device_id": {"type": "null"},
                    },
                },
            ]
        },
    )

    name: str = Field(
        examples=["ci-deployer"], json_schema_extra={"pattern": f"^{NAME_PATTERN.pattern}$"}
    )
    role: str = Field(
        examples=["operator"],
        description="viewer, operator, admin or device.",
        json_schema_extra={"enum": list(ROLES)},
    )
    device_id: str | None = Field(
        default=None,
        description="Required for role device.",
        json_schema_extra={"pattern": DEVICE_ID_PATTERN},
    )
    expires_in_s: float | None = Field(
        default=None,
        ge=1,
        le=MAX_LIFETIME_S,
        description="Seconds until it expires (at least 1, at most 100 years); None: never.",
    )


class TokenOut(BaseModel):
    """A stored token (never its secret)."""

    id: str
    name: str
    role: str
    device_id: str | None
    created_by: str | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


class CreatedTokenOut(TokenOut):
    """The new token; ``token`` is shown this once."""

    token: str


class AuditOut(BaseModel):
    """One audit row."""

    id: int | None
    at: datetime
    actor: str
    role: str
    action: str
    target: str | None
    status: int
    detail: dict[str, Any]


class WhoAmI(BaseModel):
    """The caller as the controller sees it."""

    name: str
    role: str
    token_id: str | None
    device_id: str | None
    auth_required: bool


def principal_of(request: Request) -> Principal:
    """The principal the middleware put on the request (anonymous admin when auth is off)."""
    principal = getattr(request.state, "principal", None)
    return principal if isinstance(principal, Principal) else ANONYMOUS_ADMIN


def auth_router(access: AccessControl) -> APIRouter:
    router = APIRouter(tags=["auth"])

    @router.post("/tokens", status_code=201)
    def create_token(body: TokenIn, request: Request) -> CreatedTokenOut:
        """Create a token; the answer holds its secret, which is never shown again."""
        created = access.create(
            body.name,
            body.role,
            device_id=body.device_id,
            expires_in=None if body.expires_in_s is None else timedelta(seconds=body.expires_in_s),
            created_by=principal_of(request).name,
        )
        return CreatedTokenOut.model_validate({**created.record.as_json(), "token": created.token})

    @router.get("/tokens")
    def list_tokens() -> list[TokenOut]:
        return [TokenOut.model_validate(t.as_json()) for t in access.tokens()]

    @router.delete("/tokens/{token_id}")
    def revoke_token(token_id: str) -> TokenOut:
        """Revoke a token at once (its next request gets 401)."""
        return TokenOut.model_validate(access.revoke(token_id).as_json())

    @router.get("/audit")
    async def audit(
        since: Timestamp | None = None,
        actor: str | None = None,
        limit: int = Query(default=100, ge=1, le=10_000),
    ) -> list[AuditOut]:
        """Mutating requests, newest first."""
        if since is not None and since.tzinfo is None:
            since = since.replace(tzinfo=timezone.utc)
        rows = await run_in_threadpool(access.audit, since, actor, limit)
        return [AuditOut.model_validate(r.as_json()) for r in rows]

    @router.get("/whoami")
    def whoami(request: Request) -> WhoAmI:
        p = principal_of(request)
        return WhoAmI(
            name=p.name,
            role=p.role.value,
            token_id=p.token_id,
            device_id=p.device_id,
            auth_required=access.required,
        )

    return router
