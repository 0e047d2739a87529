"""``/api/v1/agent/releases``: push an agent release (the raw .deb or release .tar.gz as the
body, streamed into the artifact store) and list them. Devices download a release's bytes
from ``/api/v1/artifacts/{sha256}`` (HTTP Range, their own token), the URL their order names.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from controller.api.answers import raw_body
from controller.api.upload_body import refuse_declared_oversize, stream_into
from controller.auth.routes import principal_of
from controller.errors import ControllerError
from controller.fleet.agent_releases import AgentReleases
from controller.records import AgentReleaseRecord
from controller.services import Services


class AgentReleaseOut(BaseModel):
    """One agent release for one architecture."""

    model_config = ConfigDict(extra="forbid")

    version: str
    arch: str
    format: str = Field(description="deb or tar.gz")
    sha256: str
    size: int
    url: str = Field(description="Where devices download it (HTTP Range, device token).")
    python: str | None = Field(description="The Python X.Y it runs on (None: not stated).")
    jetpack: list[str] = Field(description="JetPack lines it supports (empty: not stated).")
    details: dict[str, Any] = Field(description="Its other metadata (control fields, entry).")
    signed: bool = Field(description="Its manifest is signed with the fleet key.")
    key_id: str | None = Field(description="The fleet key that signed it.")
    pushed_by: str
    created_at: datetime


def release_out(r: AgentReleaseRecord, url: str) -> AgentReleaseOut:
    """The API view of a stored release (``url``: where devices download it)."""
    manifest = (r.signed_manifest or {}).get("manifest") or {}
    return AgentReleaseOut(
        version=r.version,
        arch=r.arch,
        format=r.format,
        sha256=r.sha256,
        size=r.size,
        url=url,
        python=r.python,
        jetpack=list(r.jetpack),
        details=r.details,
        signed=r.signed_manifest is not None,
        key_id=manifest.get("key_id"),
        pushed_by=r.pushed_by,
        created_at=r.created_at,
    )


def agents_router(services: Services) -> APIRouter:
    """The agent release routes over ``services.agent_releases``."""
    router = APIRouter(tags=["agent"])

    def releases() -> AgentReleases:
        if services.agent_releases is None:
            raise ControllerError("agent releases are not enabled on this controller")
        return services.agent_releases

    @router.post(
        "/agent/releases",
        status_code=201,
        responses={200: {"description": "Same version, architecture and bytes already stored."}},
        openapi_extra=raw_body("application/vnd.debian.binary-package", "application/gzip"),
    )
    async def push_release(request: Request, response: Response) -> AgentReleaseOut:
        """Store an agent release: the jetfleet-agent .deb, or its release tree as a .tar.gz
        with release.json at its top (version and architecture read from the file; 409 when
        that version and architecture are stored with other bytes)."""
        service = releases()
        refuse_declared_oversize(request, services.store.max_upload_bytes)
        pending = await run_in_threadpool(service.begin_upload)
        await stream_into(request, pending)
        actor = principal_of(request).name
        record, created = await run_in_threadpool(service.finish_upload, pending, actor)
        if not created:
            response.status_code = 200
        request.state.audit_detail = {
            "release": record.version,
            "arch": record.arch,
            "sha256": record.sha256,
        }
        return release_out(record, service.url_of(record))

    @router.get("/agent/releases")
    def list_releases() -> list[AgentReleaseOut]:
        """Every agent release, oldest push first."""
        service = releases()
        return [release_out(r, service.url_of(r)) for r in service.releases()]

    return router
