"""The controller's HTTP API: ``create_app(services)`` builds the FastAPI application."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from controller.api.answers import install_answers
from controller.api.error_bodies import validation_error_response
from controller.api.error_status import allow_every_method, controller_error_response
from controller.api.routes_agents import agents_router
from controller.api.routes_artifacts import artifacts_router
from controller.api.routes_configs import configs_router
from controller.api.routes_deployments import deployments_router
from controller.api.routes_devices import devices_router
from controller.api.routes_engines import engines_router
from controller.api.routes_enrol import enrol_router
from controller.api.routes_health import health_router
from controller.api.routes_jobs import jobs_router
from controller.api.routes_models import models_router
from controller.api.routes_rollouts import rollouts_router
from controller.api.schemas import Health
from controller.auth.install import install_auth
from controller.dashboard.login import login_router
from controller.errors import ControllerError
from controller.services import Services


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

    app.include_router(devices_router(services), prefix="/api/v1")
    app.include_router(models_router(services), prefix="/api/v1")
    app.include_router(deployments_router(services), prefix="/api/v1")
    app.include_router(artifacts_router(services), prefix="/api/v1")
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


def _kind(url: str) -> str:
    """``postgresql`` or ``sqlite``: anyone may ask /healthz, so it names no host, path or
    user (it used to tell the database and broker URLs)."""
    return url.split(":", 1)[0].split("+", 1)[0]
