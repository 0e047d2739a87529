"""``install_auth(app, access)``: the one call ``create_app`` makes to protect every route.

The dashboard's login page (:mod:`controller.dashboard.login`) sits above this package; the API
includes it next to this call.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI

from controller.auth.middleware import AuthMiddleware
from controller.auth.routes import auth_router
from controller.auth.service import AccessControl

log = logging.getLogger(__name__)


def install_auth(app: FastAPI, access: AccessControl) -> None:
    """The token/audit/whoami routes and the middleware in front of every route of ``app``
    (those included before this call and after it)."""
    app.include_router(auth_router(access), prefix="/api/v1")
    app.add_middleware(AuthMiddleware, access=access)
    if not access.required:
        log.warning(
            "API authentication is OFF: anyone who can reach the controller can read and "
            "change the fleet (start without --insecure-no-auth to require tokens)"
        )
