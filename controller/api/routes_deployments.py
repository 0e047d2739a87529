"""``/api/v1/deployments``: deploy a model version to devices, or remove it."""

from __future__ import annotations

from fastapi import APIRouter

from controller.api.convert import deployment_out
from controller.api.schemas import DeploymentResult, DeployRequest, UndeployRequest
from controller.services import Services


def deployments_router(services: Services) -> APIRouter:
    """The deployment routes over ``services.fleet``."""
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
