"""``/api/v1`` routes of the engine store: manifests, build leases, approvals, trust per class.

The routes name the caller (:func:`uploader_of`, :func:`requester_of`) and leave every decision
to :class:`~controller.artifacts.engines.EngineStore` and :mod:`controller.trust.engine_trust`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from controller.api.params import (
    DeviceIdQuery,
    EngineKeyPath,
    MaybeTuningQuery,
    TuningQuery,
)
from controller.api.schemas_engines import (
    ApproveIn,
    EngineOut,
    TrustIn,
    TrustOut,
    engine_out,
    trust_out,
)
from controller.auth.policy import Role
from controller.auth.routes import principal_of
from controller.services import Services
from controller.trust.engine_trust import Uploader
from shared.engines import BuildFailure, BuildFailureOut, EngineManifest, LeaseOut, LeaseRequest


def uploader_of(request: Request) -> Uploader:
    """A device token uploads as its device; any other token as an operator of its name."""
    principal = principal_of(request)
    if principal.role is Role.DEVICE and principal.device_id:
        return Uploader("device", principal.device_id)
    return Uploader("operator", principal.name)


def requester_of(request: Request) -> str | None:
    """The device a request for a build comes from; None for operators and viewers."""
    principal = principal_of(request)
    return principal.device_id if principal.role is Role.DEVICE else None


def engines_router(services: Services) -> APIRouter:
    """The engine routes over ``services.engines``."""
    router = APIRouter(tags=["engines"])
    engines = services.engines

    @router.put(
        "/engines/{key}",
        status_code=201,
        responses={
            200: {"description": "The identical manifest is already stored."},
            403: {"description": "A device's engine for a validity that is not its own."},
        },
    )
    def put_engine(
        key: EngineKeyPath, manifest: EngineManifest, request: Request, response: Response
    ) -> EngineManifest:
        """Store a built engine's manifest (its bytes first go to POST /artifacts). A device may
        store one only for its own validity key and hardware class."""
        stored, created = engines.put(key, manifest, uploader_of(request))
        if not created:
            response.status_code = 200
        return stored

    @router.get("/engines/{key}")
    def get_engine(
        key: EngineKeyPath, request: Request, response: Response, tuning: MaybeTuningQuery = None
    ) -> EngineManifest:
        """The manifest tuned under ``tuning`` when stored, else another tuning of the engine;
        the ``Jetfleet-Tuning-Match`` header says which (exact, other, any). A device gets only
        builds shared with it (404 otherwise: it builds its own)."""
        manifest, match = engines.get(key, tuning, requester_of(request))
        response.headers["Jetfleet-Tuning-Match"] = match
        return manifest

    @router.put("/engines/{key}/failure")
    def report_build_failure(
        key: EngineKeyPath, report: BuildFailure, request: Request
    ) -> BuildFailureOut:
        """TensorRT could not build this engine for reasons of the model: its twins serve the
        version on ONNX Runtime without building (a device reports only for its own validity)."""
        return engines.report_failure(key, report, uploader_of(request))

    @router.get("/engines/{key}/failure")
    def get_build_failure(key: EngineKeyPath) -> BuildFailureOut:
        """Why TensorRT could not build this engine, if that is known (404 otherwise)."""
        return engines.failure(key)

    @router.delete("/engines/{key}/failure", status_code=204)
    def forget_build_failure(key: EngineKeyPath) -> Response:
        """Forget a failed build: the twins try TensorRT again."""
        engines.forget_failure(key)
        return Response(status_code=204)

    @router.get("/engines")
    def list_engines() -> list[EngineOut]:
        """Every stored build with its uploader, class, approval and whether twins get it."""
        return [engine_out(e) for e in engines.entries()]

    @router.post("/engines/{key}/approve")
    def approve_engine(key: EngineKeyPath, body: ApproveIn, request: Request) -> EngineOut:
        """Share a device's build with its twins (approval mode)."""
        return engine_out(engines.approve(key, body.tuning, principal_of(request).name))

    @router.get("/engine-trust")
    def list_engine_trust() -> list[TrustOut]:
        """Per hardware class: do twins pull device builds at once, or after approval?"""
        return [trust_out(t) for t in engines.trust()]

    @router.put("/engine-trust")
    def set_engine_trust(body: TrustIn, request: Request) -> TrustOut:
        """Set the trust mode of one hardware class, or of ``default``."""
        entry = engines.set_trust(body.hardware_class, body.mode, principal_of(request).name)
        return trust_out(entry)

    @router.post("/engines/{key}/lease")
    def take_lease(key: EngineKeyPath, request: LeaseRequest) -> LeaseOut:
        """Ask to be the one device that builds ``key`` under the body's tuning (renews the
        caller's own lease)."""
        return engines.lease(key, request)

    @router.delete("/engines/{key}/lease", status_code=204)
    def release_lease(
        key: EngineKeyPath, device_id: DeviceIdQuery, tuning: TuningQuery = "default"
    ) -> Response:
        engines.release(key, device_id, tuning)
        return Response(status_code=204)

    return router
