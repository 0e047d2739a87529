"""``/api/v1/rollouts``: create, list, show, audit trail, and operator requests."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Query, Request

from controller.auth.routes import principal_of
from controller.auth.tokens import ANONYMOUS_ADMIN
from controller.errors import ControllerError, InvalidInput
from controller.rollouts.model import Operation, RolloutSpec
from controller.rollouts.schemas import (
    AuditOut,
    RolloutCreate,
    RolloutOut,
    audit_out,
    rollout_out,
)
from controller.rollouts.service import RolloutService
from controller.services import Services
from shared.agent_releases import AGENT_ARTIFACT_NAME


def rollouts_router(services: Services) -> APIRouter:
    """The rollout routes over ``services.rollouts``."""
    router = APIRouter(tags=["rollouts"])

    def actor_of(request: Request, claimed: str) -> str:
        """The token's name; what the request claims only when authentication is off."""
        principal = principal_of(request)
        return claimed if principal is ANONYMOUS_ADMIN else principal.name

    def service() -> RolloutService:
        if services.rollouts is None:
            raise ControllerError("rollouts are not enabled on this controller")
        return services.rollouts

    @router.post("/rollouts", status_code=201)
    def create_rollout(body: RolloutCreate, request: Request) -> RolloutOut:
        """Snapshot the targets, plan the waves and start the rollout."""
        fields = body.model_dump(exclude={"actor", "strict"})
        if body.kind == "agent":
            fields["model"] = body.model or AGENT_ARTIFACT_NAME
        elif body.model is None:
            raise InvalidInput("a model rollout names its model")
        spec = RolloutSpec.model_validate(fields)
        warnings = service().delegation_warnings(spec)
        if warnings and body.strict:
            raise InvalidInput("refused (strict): " + "; ".join(warnings))
        out = rollout_out(service().create(spec, actor_of(request, body.actor)))
        return out.model_copy(update={"warnings": warnings})

    @router.get("/rollouts")
    def list_rollouts() -> list[RolloutOut]:
        return [rollout_out(r, with_targets=False) for r in service().all()]

    @router.get("/rollouts/{rollout_id}")
    def show_rollout(rollout_id: str) -> RolloutOut:
        return rollout_out(service().get(rollout_id))

    @router.get("/rollouts/{rollout_id}/audit")
    def rollout_audit(
        rollout_id: str, limit: int = Query(default=1000, ge=1, le=100_000)
    ) -> list[AuditOut]:
        """Every transition of the rollout and its devices, oldest first."""
        return [audit_out(e) for e in service().audit(rollout_id, limit)]

    def operation(op: Operation) -> Callable[..., RolloutOut]:
        def operate(rollout_id: str, request: Request, actor: str = "operator") -> RolloutOut:
            return rollout_out(service().request(rollout_id, op, actor_of(request, actor)))

        operate.__doc__ = f"{op.value.capitalize()} the rollout (409 naming the state it needs)."
        return operate

    # One route per operation, not one ``{op}`` route: ``POST .../audit`` then answers 405
    # (``Allow: GET``) as for any other method a path does not take, not a 422 about ``op``.
    for op in Operation:
        router.add_api_route(
            f"/rollouts/{{rollout_id}}/{op.value}",
            operation(op),
            methods=["POST"],
            name=f"{op.value}_rollout",
            response_model=RolloutOut,
        )

    return router
    return router
