"""``GET/POST /login``: browsers cannot send a bearer header, so the dashboard uses a cookie.

The form takes an API token (viewer or higher) and stores it in an HttpOnly, SameSite=Strict
cookie that the auth middleware accepts for GET/HEAD requests only. A link of the form
``/login?next=/dashboard#token=<token>`` logs in by itself: the fragment never leaves the browser.
"""

from __future__ import annotations

from html import escape
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from controller.auth.middleware import COOKIE
from controller.auth.policy import Role
from controller.auth.service import AccessControl, Unauthenticated

MAX_FORM = 8192
_AUTOFILL = (
    "<script>(function(){var m=location.hash.match(/^#token=(.+)$/);if(!m)return;"
    "history.replaceState(null,'',location.pathname+location.search);"
    "var f=document.getElementById('login');f.token.value=decodeURIComponent(m[1]);"
    "f.submit();})();</script>"
)


def safe_next(target: str | None) -> str:
    """A local path to go to after login (never another site); ``/dashboard`` by default."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/dashboard"
    return target


def login_page(next_path: str, error: str | None = None) -> str:
    """The login form (pure)."""
    message = f"<p class='error' role='alert'>{escape(error)}</p>" if error else ""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<title>Log in · Jetfleet</title><style>body{font-family:sans-serif;margin:3em auto;"
        "max-width:32em}input[type=password]{width:100%;padding:.4em}"
        ".error{color:#b00}</style></head><body><h1>Jetfleet</h1>"
        f"{message}<form id='login' method='post' action='/login'>"
        "<label>API token<br><input type='password' name='token' autocomplete='off' "
        "placeholder='jf_…' required autofocus></label>"
        f"<input type='hidden' name='next' value='{escape(next_path)}'>"
        "<p><button>Log in</button></p></form>"
        "<p>Get a token with <code>jetfleet tokens create --name NAME --role viewer</code>.</p>"
        f"{_AUTOFILL}</body></html>"
    )


def login_router(access: AccessControl) -> APIRouter:
    router = APIRouter(tags=["dashboard"], include_in_schema=False)

    @router.get("/login", response_class=HTMLResponse)
    def show(next: str | None = None) -> HTMLResponse:
        return HTMLResponse(login_page(safe_next(next)))

    @router.post("/login", response_model=None)
    async def submit(request: Request) -> Response:
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM:
                return HTMLResponse(login_page("/dashboard", "form too large"), status_code=413)
        form = parse_qs(body.decode("utf-8", "replace"))
        token = (form.get("token") or [""])[0].strip()
        target = safe_next((form.get("next") or [""])[0])
        if access.required:
            try:
                principal = await run_in_threadpool(access.authenticate, token)
            except Unauthenticated as exc:
                return HTMLResponse(login_page(target, str(exc)), status_code=401)
            if principal.role is Role.DEVICE:
                error = "a device token cannot open the dashboard: use a viewer token"
                return HTMLResponse(login_page(target, error), status_code=403)
        response = RedirectResponse(target, status_code=303)
        if not token:
            return response
        response.set_cookie(
            COOKIE,
            token,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    return router
