"""``/api/v1/models``: upload ONNX versions and their reference outputs, list, show, analysis."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from controller.analysis.report import AnalysisReport
from controller.api.answers import raw_body
from controller.api.convert import model_out, version_out
from controller.api.params import ModelNamePath, VersionPath
from controller.api.schemas import ModelOut, ModelVersionOut
from controller.api.upload_body import body_within, refuse_declared_oversize, stream_into
from controller.api.warmup_params import (
    INPUTS_QUERY,
    SHAPE_QUERY,
    VALUE_QUERY,
    warmup_given,
)
from controller.services import Services
from shared.messages import ArtifactRef


def models_router(services: Services) -> APIRouter:
    """The model catalog routes over ``services.catalog``."""
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
