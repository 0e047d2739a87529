"""``/api/v1/artifacts``: content-addressed uploads, and downloads honouring ``Range``."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, StreamingResponse

from controller.api.answers import DOWNLOAD_RESPONSES, HEAD_RESPONSES, RANGE_PARAMETER, raw_body
from controller.api.params import Sha256Path, Sha256Query
from controller.api.upload_body import refuse_declared_oversize, stream_into
from controller.artifacts.byte_range import plan_range
from controller.auth.routes import principal_of
from controller.services import Services
from shared.engines import ArtifactOut


def artifacts_router(services: Services) -> APIRouter:
    """The artifact routes over ``services.engines`` and ``services.store``."""
    router = APIRouter(tags=["artifacts"])

    @router.post(
        "/artifacts",
        status_code=201,
        responses={200: {"description": "Those bytes were already stored."}},
        openapi_extra=raw_body("application/octet-stream"),
    )
    async def upload_artifact(
        request: Request, response: Response, sha256: Sha256Query = None
    ) -> ArtifactOut:
        """Store the raw request body (an engine, a calibration cache) content-addressed."""
        engines = services.engines
        refuse_declared_oversize(request, services.store.max_upload_bytes)
        device = principal_of(request).device_id
        pending = await run_in_threadpool(engines.begin_upload, device)
        await stream_into(request, pending)
        out, created = await run_in_threadpool(engines.finish_upload, pending, sha256)
        if not created:
            response.status_code = 200
        return out

    @router.get(
        "/artifacts/{sha256}",
        response_model=None,
        response_class=Response,
        responses=DOWNLOAD_RESPONSES,
        openapi_extra=RANGE_PARAMETER,
    )
    def download_artifact(sha256: Sha256Path, request: Request) -> Response:
        """The artifact's bytes; honours a single ``Range: bytes=...``. With
        ``--artifact-redirect``, a 307 to a presigned URL of the object store instead (send
        the same ``Range`` there)."""
        return _artifact_response(sha256, request)

    @router.head(
        "/artifacts/{sha256}",
        response_model=None,
        response_class=Response,
        responses=HEAD_RESPONSES,
        openapi_extra=RANGE_PARAMETER,
    )
    def artifact_headers(sha256: Sha256Path, request: Request) -> Response:
        """Size and range support of an artifact, without its bytes."""
        return _artifact_response(sha256, request)

    def _artifact_response(sha256: str, request: Request) -> Response:
        artifact = services.store.get(sha256)
        if request.method == "GET" and (url := services.store.presigned_url(sha256)):
            return RedirectResponse(url, status_code=307, headers={"Cache-Control": "no-store"})
        byte_range = plan_range(request.headers.get("range"), artifact.size)
        headers = {"Accept-Ranges": "bytes", "ETag": f'"{artifact.sha256}"'}
        if byte_range is None:
            start, end, status = 0, artifact.size - 1, 200
        else:
            start, end, status = byte_range.start, byte_range.end, 206
            headers["Content-Range"] = byte_range.content_range()
        headers["Content-Length"] = str(end - start + 1)
        if request.method == "HEAD":
            return Response(status_code=status, headers=headers)
        return StreamingResponse(
            services.store.open_range(sha256, start, end),
            status_code=status,
            headers=headers,
            media_type="application/octet-stream",
        )

    return router
