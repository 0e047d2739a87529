"""Error bodies that quote the request only in short: a 20 KB name makes a short 404.

Messages name what was asked for (``unknown model '<name>'``) and FastAPI's validation errors
echo the offending ``input``; a 20 KB model name made a 20 KB body. Rather than trust
every message site to shorten what it quotes, every 4xx body passes through here once: a run
of more than :data:`ECHO_CHARS` non-blank characters (a quoted name, a path, a value) keeps its
first :data:`ECHO_CHARS` and says how long it was, and a whole message keeps at most
:data:`DETAIL_CHARS`. The hints around the quote (``see `jetfleet devices ls```) survive.
Server errors (5xx) are about the controller's own state and are left whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

ECHO_CHARS = 80
"""Longest run of non-blank characters an error body quotes from the request."""
DETAIL_CHARS = 800
"""Longest message in an error body."""
MAX_VALIDATION_ERRORS = 20
"""Validation errors listed in one 422 body (a 10,000-item list can fail 10,000 times)."""


class ErrorBody(BaseModel):
    """The body of every error answer but a validation failure (401/403 from the auth
    middleware, 4xx and 5xx from the exception handler, enrolment refusals)."""

    detail: str = Field(description="What went wrong and what to do, in one message.")


_LONG_RUN = re.compile(rf"\S{{{ECHO_CHARS + 1},}}")


def clip(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` when at most ``limit`` characters, else its start, "…" and its length."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def clip_echoes(message: str) -> str:
    """``message`` with every long unbroken run clipped, then clipped to :data:`DETAIL_CHARS`."""
    return clip(_LONG_RUN.sub(lambda run: clip(run.group()), message), DETAIL_CHARS)


def clip_validation_errors(errors: Sequence[Any]) -> list[Any]:
    """FastAPI's validation errors (JSON-ready) with the echoed request values clipped and at
    most :data:`MAX_VALIDATION_ERRORS` of them, plus one line counting the rest."""
    shown = [_clip_error(e) for e in errors[:MAX_VALIDATION_ERRORS]]
    if len(errors) > MAX_VALIDATION_ERRORS:
        more = len(errors) - MAX_VALIDATION_ERRORS
        shown.append({"type": "too_many_errors", "loc": [], "msg": f"and {more} more error(s)"})
    return shown


async def validation_error_response(_request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 for a request that fails validation, with :func:`clip_validation_errors`."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    return JSONResponse(
        {"detail": clip_validation_errors(jsonable_encoder(errors))}, status_code=422
    )


def _clip_error(error: Any) -> Any:
    if not isinstance(error, dict):
        return _clip_json(error)
    clipped = {key: _clip_json(value) for key, value in error.items() if key != "input"}
    if "input" in error:
        echoed = error["input"]
        text = echoed if isinstance(echoed, str) else json.dumps(echoed)
        clipped["input"] = echoed if len(text) <= ECHO_CHARS else clip(text)
    return clipped


def _clip_json(value: Any) -> Any:
    if isinstance(value, str):
        return clip_echoes(value)
    if isinstance(value, list):
        return [_clip_json(v) for v in value]
    if isinstance(value, dict):
        return {clip(str(k)): _clip_json(v) for k, v in value.items()}
    return value
