"""Which answers each route can give, and the OpenAPI declarations built from that table.

Generated clients only handle the answers the OpenAPI document declares, so every status a route
can answer is declared there with the body it really has: :class:`ErrorBody` (``{"detail":
"..."}``, every error the controller and its auth middleware send) or, for a request that fails
validation, FastAPI's ``HTTPValidationError`` (the same ``detail`` key holding a list).

:data:`ROUTE_ERRORS` is the table, kept by hand next to the routes: per operation, the error
statuses its route and the services it calls raise (``NotFound`` 404, ``Conflict`` 409,
``InvalidInput`` 400, ``InvalidReference``/``TooManyNodes`` 422, ``UploadTooLarge`` 413,
``RangeNotSatisfiable`` 416, see ``STATUS`` in :mod:`.error_status`). :func:`answers_of` adds what
follows from the rules every route shares: 401/403 unless the auth policy makes the route public,
413 where a device token's body is read to check its device, 422 where FastAPI validates
parameters or a body, and 503 everywhere (database, broker, stopping). A new route without a row
fails ``tests/integration/controller/test_openapi.py``.

:func:`install_answers` makes ``app.openapi()`` declare them (pure post-processing of the
document FastAPI builds; no route changes behaviour). The download and raw-upload declarations
(:data:`DOWNLOAD_RESPONSES`, :func:`raw_body`) are used by the routes themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI

from controller.api.error_bodies import ErrorBody
from controller.auth.policy import device_rule, required_role
from controller.records.rollouts import Operation

_G, _P, _U, _D, _H = "GET", "POST", "PUT", "DELETE", "HEAD"
_V1 = "/api/v1"

ROUTE_ERRORS: Mapping[tuple[str, str], frozenset[int]] = {
    (method, path): frozenset(codes)
    for method, path, codes in [
        (_G, "/healthz", ()),
        (_G, "/metrics", ()),
        # devices and ingest (app.py)
        (_G, f"{_V1}/devices", ()),
        (_G, f"{_V1}/devices/{{device_id}}", (404,)),
        (_U, f"{_V1}/devices/{{device_id}}/labels", (400, 404)),
        (_P, f"{_V1}/devices/{{device_id}}/accept-class", (400, 404, 409)),
        (_G, f"{_V1}/devices/{{device_id}}/telemetry", (404,)),
        (_G, f"{_V1}/devices/{{device_id}}/events", (404,)),
        (_G, f"{_V1}/ingest", ()),
        # models (app.py)
        (_U, f"{_V1}/models/{{name}}/versions/{{version}}", (400, 409, 413, 422)),
        (_U, f"{_V1}/models/{{name}}/versions/{{version}}/reference", (400, 404, 413, 422)),
        (_G, f"{_V1}/models", ()),
        (_G, f"{_V1}/models/{{name}}", (404,)),
        (_G, f"{_V1}/models/{{name}}/versions/{{version}}", (404,)),
        (_G, f"{_V1}/models/{{name}}/versions/{{version}}/analysis", (404, 409)),
        # deployments, configs, artifacts (app.py)
        (_P, f"{_V1}/deployments", (400, 404)),
        (_P, f"{_V1}/deployments/remove", (400, 404)),
        (_U, f"{_V1}/configs/{{name}}", (400, 404, 409)),
        (_G, f"{_V1}/configs", ()),
        (_G, f"{_V1}/configs/{{name}}", (400, 404)),
        (_D, f"{_V1}/configs/{{name}}", (400, 404)),
        (_G, f"{_V1}/configs/{{name}}/resolve", (400, 404)),
        (_G, f"{_V1}/devices/{{device_id}}/resolve", (400, 404)),
        (_P, f"{_V1}/artifacts", (400, 413, 429)),
        (_G, f"{_V1}/artifacts/{{sha256}}", (400, 404, 416)),
        (_H, f"{_V1}/artifacts/{{sha256}}", (400, 404, 416)),
        # engines (routes_engines.py)
        (_U, f"{_V1}/engines/{{key}}", (400, 403)),
        (_G, f"{_V1}/engines/{{key}}", (400, 404)),
        (_G, f"{_V1}/engines", ()),
        (_P, f"{_V1}/engines/{{key}}/approve", (400, 404)),
        (_G, f"{_V1}/engine-trust", ()),
        (_U, f"{_V1}/engine-trust", (400,)),
        (_P, f"{_V1}/engines/{{key}}/lease", (400,)),
        (_D, f"{_V1}/engines/{{key}}/lease", (400,)),
        (_U, f"{_V1}/engines/{{key}}/failure", (400, 403)),
        (_G, f"{_V1}/engines/{{key}}/failure", (400, 404)),
        (_D, f"{_V1}/engines/{{key}}/failure", (400, 404)),
        # agent releases (routes_agents.py)
        (_P, f"{_V1}/agent/releases", (400, 409, 413)),
        (_G, f"{_V1}/agent/releases", ()),
        # rollouts (routes_rollouts.py)
        (_P, f"{_V1}/rollouts", (400, 404, 409)),
        (_G, f"{_V1}/rollouts", ()),
        (_G, f"{_V1}/rollouts/{{rollout_id}}", (404,)),
        (_G, f"{_V1}/rollouts/{{rollout_id}}/audit", (404,)),
        *((_P, f"{_V1}/rollouts/{{rollout_id}}/{op.value}", (404, 409)) for op in Operation),
        # jobs (routes_jobs.py)
        (_P, f"{_V1}/devices/{{device_id}}/profile", (400, 404, 409)),
        (_P, f"{_V1}/tune", (400, 404)),
        (_G, f"{_V1}/jobs", ()),
        (_G, f"{_V1}/jobs/{{job_id}}", (404,)),
        (_P, f"{_V1}/jobs/{{job_id}}/cancel", (404, 409)),
        (_G, f"{_V1}/models/{{name}}/versions/{{version}}/profiles", (404,)),
        # enrolment (routes_enrol.py): EnrolmentRefused carries 401/403/409/410
        (_P, f"{_V1}/enroll", (400, 401, 403, 409, 410, 429)),
        (_P, f"{_V1}/enrol-tokens", (400,)),
        (_G, f"{_V1}/enrol-tokens", ()),
        (_G, f"{_V1}/identities", ()),
        (_P, f"{_V1}/devices/{{device_id}}/revoke", (404,)),
        # health (routes_health.py)
        (_G, f"{_V1}/fleet/summary", (400,)),
        (_G, f"{_V1}/devices/{{device_id}}/health", (404,)),
        (_G, f"{_V1}/devices/{{device_id}}/series", (400, 404)),
        # tokens, audit, whoami (controller/auth/routes.py)
        (_P, f"{_V1}/tokens", (400,)),
        (_G, f"{_V1}/tokens", ()),
        (_D, f"{_V1}/tokens/{{token_id}}", (404,)),
        (_G, f"{_V1}/audit", ()),
        (_G, f"{_V1}/whoami", ()),
    ]
}
"""Per ``(METHOD, path template)``: the error statuses the route itself can answer."""

DESCRIPTIONS: Mapping[int, str] = {
    400: "The request is wrong; `detail` says what to change.",
    401: "No valid API token (give `Authorization: Bearer <token>`).",
    403: "The token's role or device may not make this request.",
    404: "What the request names does not exist.",
    409: "The request contradicts what is stored, or the state it needs.",
    410: "The enrolment token was already used or has expired.",
    413: "The request body is larger than this controller accepts.",
    416: "The byte range lies outside the artifact (`Content-Range: bytes */<size>`).",
    422: "The request fails validation, or its content does not fit the model.",
    429: "Too many attempts from this address, or a device past its upload quota; retry after "
    "`Retry-After` seconds.",
    503: "The database, MQTT broker or object store is unavailable, or the controller is "
    "stopping; retry.",
}

_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
_VALIDATION_REF = {"$ref": "#/components/schemas/HTTPValidationError"}
_HEADERS: Mapping[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"schema": {"type": "string"}}},
    416: {"Content-Range": {"schema": {"type": "string"}}},
    429: {"Retry-After": {"schema": {"type": "string"}}},
}
_BINARY = {"type": "string", "format": "binary"}
_RANGE_HEADERS = {
    "Accept-Ranges": {"schema": {"type": "string", "enum": ["bytes"]}},
    "ETag": {"schema": {"type": "string"}, "description": "The artifact's SHA-256, quoted."},
    "Content-Length": {"schema": {"type": "integer"}},
}

DOWNLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The whole artifact.",
        "content": {"application/octet-stream": {"schema": _BINARY}},
        "headers": _RANGE_HEADERS,
    },
    206: {
        "description": "The bytes of the one range asked for with `Range: bytes=...`.",
        "content": {"application/octet-stream": {"schema": _BINARY}},
        "headers": {**_RANGE_HEADERS, "Content-Range": {"schema": {"type": "string"}}},
    },
    307: {
        "description": "With `--artifact-redirect`: GET the presigned object-store URL in "
        "`Location` instead, with the same `Range` (and without this API's token).",
        "headers": {"Location": {"schema": {"type": "string", "format": "uri"}}},
    },
}
"""``responses=`` of GET ``/artifacts/{sha256}`` (engines, calibration caches, models and
reference NPZs are all downloaded there)."""

HEAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"description": answer["description"], "headers": answer["headers"]}
    for code, answer in DOWNLOAD_RESPONSES.items()
    if code != 307
}
"""``responses=`` of HEAD ``/artifacts/{sha256}``: the same headers, no body (never a
redirect)."""

RANGE_PARAMETER: dict[str, Any] = {
    "parameters": [
        {
            "name": "Range",
            "in": "header",
            "required": False,
            "schema": {"type": "string", "examples": ["bytes=0-1023"]},
            "description": "One byte range (`bytes=start-end`, `bytes=start-`, `bytes=-suffix`).",
        }
    ]
}
"""``openapi_extra=`` of the artifact downloads: the ``Range`` header they honour."""


def raw_body(*media_types: str) -> dict[str, Any]:
    """``openapi_extra=`` of a route that reads its raw body (one of ``media_types``)."""
    return {
        "requestBody": {
            "required": True,
            "content": {media: {"schema": _BINARY} for media in media_types},
        }
    }


def answers_of(method: str, path: str, validated: bool) -> frozenset[int]:
    """Every error status ``method path`` can answer: its :data:`ROUTE_ERRORS` row plus the
    shared rules (``validated``: FastAPI checks its parameters or body). A route without a row
    gets the shared rules only (the document still serves; the OpenAPI test names the route)."""
    codes = set(ROUTE_ERRORS.get((method.upper(), path), ())) | {503}
    if required_role(method, path) is not None:
        codes |= {401, 403}
    if device_rule(method, _example(path))[1] is not None:
        codes.add(413)
    if validated:
        codes.add(422)
    return frozenset(codes)


def declare_answers(document: dict[str, Any]) -> None:
    """Add every operation's error answers (:func:`answers_of`) to ``document`` in place."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("ErrorBody", ErrorBody.model_json_schema())
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            validated = bool(operation.get("parameters")) or "requestBody" in operation
            own = ROUTE_ERRORS.get((method.upper(), path), frozenset())
            for code in sorted(answers_of(method, path, validated)):
                body = _body_schema(code, validated, code in own)
                answer = _declared(code, body, responses.get(str(code)))
                if method.upper() == "HEAD":
                    answer.pop("content")  # a HEAD answer has no body, only its headers
                responses[str(code)] = answer


def install_answers(app: FastAPI) -> None:
    """Make ``app.openapi()`` (and ``/openapi.json``) declare :func:`declare_answers`."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            declare_answers(build())
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]


def _body_schema(code: int, validated: bool, own: bool) -> dict[str, Any]:
    """ErrorBody; a 422 of FastAPI's validation is ``HTTPValidationError``, and a route whose
    service also answers 422 (:data:`ROUTE_ERRORS`) may send either."""
    if code != 422 or not validated:
        return dict(_ERROR_REF)
    return {"anyOf": [_VALIDATION_REF, _ERROR_REF]} if own else dict(_VALIDATION_REF)


def _declared(code: int, schema: dict[str, Any], present: dict[str, Any] | None) -> dict[str, Any]:
    """The response object of ``code`` (a description the route gave itself is kept)."""
    answer: dict[str, Any] = {
        "description": DESCRIPTIONS[code],
        "content": {"application/json": {"schema": schema}},
    }
    if code in _HEADERS:
        answer["headers"] = _HEADERS[code]
    described = (present or {}).get("description")
    if described and described != "Validation Error":
        answer["description"] = described
    return answer


def _example(path: str) -> str:
    """``path`` with each ``{param}`` replaced by a sample value (for the path-matching rules)."""
    return "/".join("x" if part.startswith("{") else part for part in path.split("/"))
