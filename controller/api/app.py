"""The controller's HTTP API: ``create_app(services)`` builds the FastAPI application."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, StreamingResponse
from starlette.exceptions import HTTPException

from controller.analysis.report import AnalysisReport
from controller.api.answers import (
    DOWNLOAD_RESPONSES,
    HEAD_RESPONSES,
    RANGE_PARAMETER,
    install_answers,
    raw_body,
)
from controller.api.convert import (
    deployment_out,
    device_out,
    event_out,
    ingest_out,
    model_out,
    telemetry_out,
    version_out,
)
from controller.api.error_bodies import validation_error_response
from controller.api.error_status import allow_every_method, controller_error_response
from controller.api.params import (
    DeviceIdPath,
    ModelNamePath,
    Sha256Path,
    Sha256Query,
    VersionPath,
)
from controller.api.routes_agents import agents_router
from controller.api.routes_configs import configs_router
from controller.api.routes_engines import engines_router
from controller.api.routes_enrol import enrol_router
from controller.api.routes_health import health_router
from controller.api.routes_jobs import jobs_router
from controller.api.routes_rollouts import rollouts_router
from controller.api.schemas import (
    DeploymentResult,
    DeployRequest,
    DeviceLabelsIn,
    DeviceOut,
    EventOut,
    Health,
    IngestStats,
    ModelOut,
    ModelVersionOut,
    TelemetrySampleOut,
    UndeployRequest,
)
from controller.api.upload_body import body_within, refuse_declared_oversize, stream_into
from controller.api.warmup_params import (
    INPUTS_QUERY,
    SHAPE_QUERY,
    VALUE_QUERY,
    warmup_given,
)
from controller.artifacts.byte_range import plan_range
from controller.auth.install import install_auth
from controller.auth.routes import principal_of
from controller.dashboard.login import login_router
from controller.errors import (
    ControllerError,
    InvalidInput,
)
from controller.services import Services
from controller.trust.labels import check_labels
from shared.engines import ArtifactOut
from shared.messages import ArtifactRef
from shared.topics import TopicError, check_device_id


def create_app(services: Services) -> FastAPI:
    """The FastAPI app serving ``/healthz`` and ``/api/v1`` over ``services``."""
    app = FastAPI(title="Jetfleet controller", version="1")

    app.add_exception_handler(ControllerError, controller_error_response)
    app.add_exception_handler(RequestValidationError, validation_error_response)
    app.add_exception_handler(HTTPException, allow_every_method)

    @app.get("/healthz")
    def healthz() -> Health:
        services.repo.ping()
        return Health(
            status="ok",
            database=_kind(services.database_label),
            broker=_kind(services.broker_label),
        )

    app.include_router(_devices(services), prefix="/api/v1")
    app.include_router(_models(services), prefix="/api/v1")
    app.include_router(_deployments(services), prefix="/api/v1")
    app.include_router(_artifacts(services), prefix="/api/v1")
    app.include_router(configs_router(services), prefix="/api/v1")
    app.include_router(engines_router(services), prefix="/api/v1")
    app.include_router(rollouts_router(services), prefix="/api/v1")
    app.include_router(agents_router(services), prefix="/api/v1")
    app.include_router(jobs_router(services), prefix="/api/v1")
    app.include_router(enrol_router(services), prefix="/api/v1")
    app.include_router(health_router(services))
    if services.access is not None:
        app.include_router(login_router(services.access))
        install_auth(app, services.access)
    install_answers(app)
    return app


def _devices(services: Services) -> APIRouter:
    router = APIRouter(tags=["devices"])

    @router.get("/devices")
    def list_devices() -> list[DeviceOut]:
        return [device_out(d) for d in services.repo.devices()]

    @router.get("/devices/{device_id}")
    def show_device(device_id: DeviceIdPath) -> DeviceOut:
        return device_out(services.repo.device(device_id))

    @router.put("/devices/{device_id}/labels")
    def set_device_labels(device_id: DeviceIdPath, body: DeviceLabelsIn) -> DeviceOut:
        """Replace the device's labels with the body's whole set (the operator's word; what the
        device reports is ignored)."""
        try:
            check_device_id(device_id)
        except TopicError as exc:
            raise InvalidInput(str(exc)) from exc
        services.repo.set_labels(device_id, check_labels(body.labels))
        return device_out(services.repo.device(device_id))

    @router.post("/devices/{device_id}/accept-class")
    def accept_device_class(device_id: DeviceIdPath) -> DeviceOut:
        """Pin the device to the hardware class it reports now (who may upload engines for it)."""
        services.repo.accept_class(device_id)
        return device_out(services.repo.device(device_id))

    @router.get("/devices/{device_id}/telemetry")
    def device_telemetry(
        device_id: DeviceIdPath, limit: int = Query(default=50, ge=1, le=10_000)
    ) -> list[TelemetrySampleOut]:
        return [telemetry_out(t) for t in services.repo.telemetry(device_id, limit)]

    @router.get("/devices/{device_id}/events")
    def device_events(
        device_id: DeviceIdPath, limit: int = Query(default=50, ge=1, le=10_000)
    ) -> list[EventOut]:
        return [event_out(e) for e in services.repo.events(device_id, limit)]

    @router.get("/ingest", tags=["ingest"])
    def ingest_stats() -> IngestStats:
        return ingest_out(services.ingest.stats())

    return router


def _models(services: Services) -> APIRouter:
    router = APIRouter(tags=["models"])
    catalog = services.catalog

    @router.put(
        "/models/{name}/versions/{version}",
        status_code=201,
        responses={200: {"description": "Same bytes already stored (idempotent)."}},
        openapi_extra=raw_body("application/octet-stream"),
    )
    async def upload_version(
        name: ModelNamePath,
        version: VersionPath,
        request: Request,
        response: Response,
        shape: list[str] = SHAPE_QUERY,
        value: list[str] = VALUE_QUERY,
        inputs_sha256: str | None = INPUTS_QUERY,
    ) -> ModelVersionOut:
        """Upload the raw ONNX bytes of ``name:version`` as the request body; ``shape``,
        ``value``, ``inputs_sha256``: inputs the model accepts, for its reference outputs and
        warm-up (``reference_error`` says when ONNX Runtime failed on them)."""
        catalog.check_names(name, version)
        given = warmup_given(shape, value, inputs_sha256)
        refuse_declared_oversize(request, services.store.max_upload_bytes)
        pending = await run_in_threadpool(catalog.begin_upload)
        await stream_into(request, pending)
        out, created = await run_in_threadpool(catalog.finish_upload, name, version, pending, given)
        if not created:
            response.status_code = 200
        return version_out(out)

    @router.put(
        "/models/{name}/versions/{version}/reference",
        openapi_extra=raw_body("application/x-npz", "application/octet-stream"),
    )
    async def put_reference(
        name: ModelNamePath, version: VersionPath, request: Request
    ) -> ArtifactRef:
        """Upload reference outputs (NPZ: ``input:<name>``/``output:<name>``, first axis = case)."""
        body = await body_within(request, services.store.max_upload_bytes)
        return await run_in_threadpool(catalog.set_reference, name, version, body)

    @router.get("/models")
    def list_models() -> list[ModelOut]:
        return [model_out(name, versions) for name, versions in catalog.models().items()]

    @router.get("/models/{name}")
    def show_model(name: ModelNamePath) -> ModelOut:
        return model_out(name, catalog.model(name))

    @router.get("/models/{name}/versions/{version}")
    def show_version(name: ModelNamePath, version: VersionPath) -> ModelVersionOut:
        return version_out(catalog.version(name, version))

    @router.get("/models/{name}/versions/{version}/analysis")
    def show_analysis(
        name: ModelNamePath, version: VersionPath, trt: str = "10.1"
    ) -> AnalysisReport:
        """The static delegate analysis for TensorRT parser ``trt`` (it runs after the push:
        409 while the version's ``analysis_state`` is pending, 404 when it failed)."""
        return catalog.analysis(name, version, trt)

    return router


def _deployments(services: Services) -> APIRouter:
    router = APIRouter(tags=["deployments"])

    @router.post("/deployments")
    def deploy(request: DeployRequest) -> DeploymentResult:
        done = services.fleet.deploy(
            request.model,
            request.version,
            device=request.device,
            selector=request.selector,
            delegate=request.delegate,
            config=request.config,
        )
        return deployment_out(done)

    @router.post("/deployments/remove")
    def undeploy(request: UndeployRequest) -> DeploymentResult:
        done = services.fleet.undeploy(
            request.model, device=request.device, selector=request.selector
        )
        return deployment_out(done)

    return router


def _artifacts(services: Services) -> APIRouter:
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


def _kind(url: str) -> str:
    """``postgresql`` or ``sqlite``: anyone may ask /healthz, so it names no host, path or
    user (it used to tell the database and broker URLs)."""
    return url.split(":", 1)[0].split("+", 1)[0]
