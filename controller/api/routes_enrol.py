"""``POST /api/v1/enroll`` (public, rate-limited per client address), enrolment tokens, device
identities and revocation (operator tokens, see :mod:`controller.auth.policy`).

The rate limit is kept in the database (``Services.enrol_limiter``), so it holds across every
controller replica behind a load balancer, not per replica.

The client address is the TCP peer's; ``X-Forwarded-For`` counts only from the proxies given to
``jetfleet serve --trusted-proxy`` (uvicorn rewrites ``request.client`` for those alone)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from controller.api.params import DeviceIdPath
from controller.services import Services
from controller.trust.enrolment import DEFAULT_EXPIRY, MAX_EXPIRY, EnrolmentRefused
from controller.trust.enrolment_rate import RateLimiter, SharedRateLimiter, retry_after_header
from controller.trust.labels import LABELS_SCHEMA
from shared.enrolment import EnrolmentAnswer
from shared.topics import DEVICE_ID_PATTERN

logger = logging.getLogger(__name__)


class EnrolIn(BaseModel):
    """What an agent sends to enrol."""

    model_config = ConfigDict(extra="forbid")

    token: str = Field(max_length=200, description="The one-time enrolment token.")
    device_id: str | None = Field(
        default=None,
        max_length=64,
        description="Required unless the token names the device.",
        json_schema_extra={"pattern": DEVICE_ID_PATTERN},
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="The agent's own labels: ignored (and logged); the device gets its token's.",
    )
    facts: dict[str, Any] | None = Field(
        default=None, description="The agent's probed DeviceFacts (logged at enrolment)."
    )


class IdentityOut(EnrolmentAnswer):
    """The enrolled device's identity; the secrets are shown this once."""


class EnrolTokenIn(BaseModel):
    """POST /api/v1/enrol-tokens."""

    model_config = ConfigDict(extra="forbid")

    labels: dict[str, str] = Field(default_factory=dict, json_schema_extra=LABELS_SCHEMA)
    expires_in_s: float = Field(
        default=DEFAULT_EXPIRY.total_seconds(), ge=1, le=MAX_EXPIRY.total_seconds()
    )
    device_id: str | None = Field(
        default=None,
        description="Only this device may enrol.",
        json_schema_extra={"pattern": DEVICE_ID_PATTERN},
    )


class EnrolTokenOut(BaseModel):
    """A stored enrolment token (never its secret)."""

    id: str
    labels: dict[str, str]
    device_id: str | None
    created_by: str | None
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None
    used_by: str | None


class CreatedEnrolTokenOut(EnrolTokenOut):
    """The new token; ``token`` is shown this once."""

    token: str


class DeviceIdentityOut(BaseModel):
    """An enrolled (or revoked) device identity, without secrets."""

    device_id: str
    broker_username: str
    api_token_id: str | None
    enrolled_at: datetime
    revoked_at: datetime | None


def _actor(request: Request) -> str | None:
    principal = getattr(request.state, "principal", None)
    name = getattr(principal, "name", None)
    return name if isinstance(name, str) else None


def enrol_router(services: Services) -> APIRouter:
    """The enrolment routes over ``services.enrolment`` (none when it is not wired)."""
    router = APIRouter(tags=["enrolment"])
    enrolment = services.enrolment
    if enrolment is None:
        return router
    limiter: RateLimiter | SharedRateLimiter = services.enrol_limiter or RateLimiter()

    @router.post("/enroll", response_model=IdentityOut)
    async def enroll(body: EnrolIn, request: Request) -> Response:
        """Exchange a one-time enrolment token for the device's identity."""
        client = request.client.host if request.client else "unknown"
        wait = await run_in_threadpool(limiter.take, client)
        if wait is not None:
            logger.warning("enrolment from %s refused: rate limit", client)
            return JSONResponse(
                {"detail": "too many enrolment attempts from this address; retry later"},
                status_code=429,
                headers={"Retry-After": retry_after_header(wait)},
            )
        try:
            issued = await run_in_threadpool(
                enrolment.enrol, body.token, body.device_id, body.labels
            )
        except EnrolmentRefused as exc:
            logger.warning("enrolment from %s refused (%d): %s", client, exc.status, exc)
            return JSONResponse({"detail": str(exc)}, status_code=exc.status)
        facts = body.facts or {}
        logger.info(
            "device %s enrolled from %s (host %s, %s)",
            issued.device_id,
            client,
            str(facts.get("hostname", "?"))[:64],
            str(facts.get("arch", "?"))[:32],
        )
        return JSONResponse(issued.model_dump(mode="json"))

    @router.post("/enrol-tokens", status_code=201)
    def create_enrol_token(body: EnrolTokenIn, request: Request) -> CreatedEnrolTokenOut:
        """A one-time, expiring enrolment token; the token text is shown this once."""
        created = enrolment.create_token(
            labels=body.labels,
            expires_in=timedelta(seconds=body.expires_in_s),
            device_id=body.device_id,
            created_by=_actor(request),
        )
        return CreatedEnrolTokenOut(**created.record.as_json(), token=created.token)

    @router.get("/enrol-tokens")
    def list_enrol_tokens() -> list[EnrolTokenOut]:
        return [EnrolTokenOut(**t.as_json()) for t in enrolment.tokens()]

    @router.get("/identities")
    def list_identities() -> list[DeviceIdentityOut]:
        return [DeviceIdentityOut(**i.as_json()) for i in enrolment.identities()]

    @router.post("/devices/{device_id}/revoke")
    def revoke_device(device_id: DeviceIdPath) -> DeviceIdentityOut:
        """Remove the device's broker access at once and revoke its API token."""
        return DeviceIdentityOut(**enrolment.revoke(device_id).as_json())

    return router
