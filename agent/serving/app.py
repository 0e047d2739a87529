"""KServe v2 REST on Starlette; Prometheus ``/metrics``. :mod:`agent.serving.http_server` serves it.

Routes: ``/v2`` (server metadata), ``/v2/health/live``, ``/v2/health/ready``,
``/v2/models/<name>`` and ``/v2/models/<name>/versions/<v>`` (model metadata),
``/v2/models/<name>[/versions/<v>]/ready`` and ``POST /v2/models/<name>[/versions/<v>]/infer``
with JSON tensors (read by :mod:`agent.serving.infer_body`) or the binary tensor data extension
(:mod:`agent.serving.kserve`), and ``/metrics``.
Errors use KServe's shape ``{"error": "..."}``: 400 for a request that does not fit the model
(a body that is not JSON or nests deeper than :data:`shared.codec.MAX_JSON_DEPTH` levels, a
tensor the model refuses, ONNX Runtime's INVALID_ARGUMENT included), 413 for a body over
``max_body_bytes`` (read no further), 404 for an unknown model or version, 503 when a model's
queue is full or a cold swap held the request too long. Every infer request is counted in
:class:`Metrics` and, when given, in the Prometheus exporter. Requests lease their engine
through :meth:`ModelRegistry.acquire`, so a swap never fails a request (see
:mod:`agent.serving.core`). With a :class:`Batcher`, requests of models that ask for it are
dynamically batched on their leased engine (:mod:`agent.serving.batching`).

Starlette rather than FastAPI: the routes take no validated bodies (the KServe body is parsed
by :mod:`agent.serving.kserve`), and FastAPI's import alone costs an idle agent
~11 MB of an idle agent's RSS.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent.errors import InferenceError, InvalidInputError
from agent.runtimes.base import TensorSpec
from agent.serving.batching import Batcher
from agent.serving.core import Busy, ModelRegistry, NotServed
from agent.serving.infer_body import load_infer_body
from agent.serving.kserve import (
    SHM_OFF,
    binary_outputs,
    decode_request,
    encode_response,
    requested_outputs,
    shared_memory_outputs,
    split_body,
)
from agent.serving.prometheus import CONTENT_TYPE, PromMetrics
from agent.serving.shared_memory import RegionError, SharedMemoryRegions
from agent.telemetry.metrics import Metrics
from shared.codec import JSONError, load_json

PLATFORM = "onnxruntime_onnx"
EXTENSIONS = ["binary_tensor_data", "model_repository_metadata", "metrics"]
HEADER_LENGTH = "inference-header-content-length"
MAX_BODY_BYTES = 256 << 20
"""Largest request body read (413 past it): a 1x3x1024x1024 FP32 image as JSON tensors is
~120 MB; binary data is a quarter of its JSON."""


class BodyTooLarge(InvalidInputError):
    """A request body over the limit (HTTP 413); only that much of it was read."""


async def _body_within(request: Request, limit: int) -> bytes:
    """The whole request body, refused as soon as it is declared or grows past ``limit``."""
    declared = request.headers.get("content-length", "")
    too_large = f"request body is over the {limit}-byte limit"
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(too_large)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(too_large)
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _tensors(specs: Any) -> list[dict[str, Any]]:
    return [
        {"name": s.name, "datatype": s.datatype, "shape": list(s.shape)}
        for s in specs
        if isinstance(s, TensorSpec)
    ]


def _parse_body(raw: bytes, load: Callable[[bytes], Any] = load_json) -> dict[str, Any]:
    try:
        body = load(raw)
    except JSONError as exc:
        raise InvalidInputError(f"request body: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidInputError("request body must be a JSON object")
    return body


def _run_inference(
    registry: ModelRegistry,
    name: str,
    version: str | None,
    body: dict[str, Any],
    binary: bytes,
    batcher: Batcher | None = None,
    regions: SharedMemoryRegions | None = None,
) -> tuple[bytes, int | None, str]:
    with registry.acquire(name) as entry:
        if version is not None and version != entry.version:
            raise NotServed(f"model {name!r} serves version {entry.version!r}, not {version!r}")
        model = entry.model
        feeds = decode_request(body, model.inputs, binary, regions)
        names = requested_outputs(body, model.outputs)
        if batcher is None:
            results = model.infer(feeds)
        else:
            results = batcher.infer(name, entry, model, feeds)
        served = entry.version
    response: dict[str, Any] = {"model_name": name, "model_version": served}
    if isinstance(body.get("id"), str):
        response["id"] = body["id"]
    del feeds  # inputs may be views of shared memory: release them before answering
    payload, header_length = encode_response(
        response,
        results,
        names,
        binary_outputs(body, names),
        shared_memory_outputs(body),
        regions,
    )
    return payload, header_length, served


def create_app(
    registry: ModelRegistry,
    metrics: Metrics,
    is_ready: Callable[[], bool],
    server_version: str,
    prometheus: PromMetrics | None = None,
    batcher: Batcher | None = None,
    shared_memory: SharedMemoryRegions | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Starlette:
    """The KServe v2 app over ``registry``; ``is_ready`` says whether every desired slot serves.

    With ``batcher``, infer requests of models it has a policy for are dynamically batched
    (:mod:`agent.serving.batching`) and ``/metrics`` adds its batch counters. With
    ``shared_memory``,
    clients may register system shared-memory regions and pass tensors through them
    (:mod:`agent.serving.shared_memory`); without it those routes answer 400 saying how to turn it
    on.
    """
    extensions = EXTENSIONS + (["system_shared_memory"] if shared_memory is not None else [])
    routes = [
        *_shared_memory_routes(shared_memory),
        *_server_routes(registry, is_ready, server_version, extensions, prometheus, batcher),
        *_model_routes(registry),
        *_infer_routes(registry, metrics, prometheus, batcher, shared_memory, max_body_bytes),
    ]
    return Starlette(routes=routes, exception_handlers={StarletteHTTPException: _http_error})


async def _http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    return _error(exc.status_code, str(exc.detail))


def _server_routes(
    registry: ModelRegistry,
    is_ready: Callable[[], bool],
    server_version: str,
    extensions: list[str],
    prometheus: PromMetrics | None,
    batcher: Batcher | None,
) -> list[Route]:
    """``/v2`` (server metadata), ``/metrics`` and the two health routes."""

    def server_metadata(_: Request) -> Response:
        return JSONResponse(
            {"name": "jetfleet-agent", "version": server_version, "extensions": extensions}
        )

    def metrics_text(_: Request) -> Response:
        exporter = prometheus or PromMetrics(registry)
        text = exporter.render() + (batcher.render() if batcher is not None else "")
        return Response(text, media_type=CONTENT_TYPE)

    def live(_: Request) -> Response:
        return JSONResponse({"live": True})

    def ready(_: Request) -> Response:
        ok = is_ready()
        return JSONResponse({"ready": ok}, status_code=200 if ok else 503)

    get = ["GET"]
    return [
        Route("/v2", server_metadata, methods=get),
        Route("/metrics", metrics_text, methods=get),
        Route("/v2/health/live", live, methods=get),
        Route("/v2/health/ready", ready, methods=get),
    ]


def _model_routes(registry: ModelRegistry) -> list[Route]:
    """A model's metadata and readiness, with or without its version in the path."""

    def served_entry(request: Request) -> tuple[Any, Response | None]:
        name = request.path_params["name"]
        version = request.path_params.get("version")
        entry = registry.get(name)
        if entry is None:
            return None, _error(404, f"model {name!r} is not being served")
        if version is not None and version != entry.version:
            return None, _error(
                404, f"model {name!r} serves version {entry.version!r}, not {version!r}"
            )
        return entry, None

    def model_metadata(request: Request) -> Response:
        entry, error = served_entry(request)
        if error is not None:
            return error
        return JSONResponse(
            {
                "name": entry.name,
                "versions": [entry.version],
                "platform": PLATFORM,
                "inputs": _tensors(entry.model.inputs),
                "outputs": _tensors(entry.model.outputs),
            }
        )

    def model_ready(request: Request) -> Response:
        entry, error = served_entry(request)
        if error is not None:
            return error
        return JSONResponse({"name": entry.name, "ready": True})

    get = ["GET"]
    return [
        Route("/v2/models/{name}", model_metadata, methods=get),
        Route("/v2/models/{name}/versions/{version}", model_metadata, methods=get),
        Route("/v2/models/{name}/ready", model_ready, methods=get),
        Route("/v2/models/{name}/versions/{version}/ready", model_ready, methods=get),
    ]


def _infer_routes(
    registry: ModelRegistry,
    metrics: Metrics,
    prometheus: PromMetrics | None,
    batcher: Batcher | None,
    shared_memory: SharedMemoryRegions | None,
    max_body_bytes: int,
) -> list[Route]:
    """``POST .../infer``: run a request on the model's leased engine, counted in the metrics."""

    async def infer(request: Request) -> Response:
        name: str = request.path_params["name"]
        version: str | None = request.path_params.get("version")
        started = time.perf_counter()
        status, message = 200, ""
        served: str | None = None
        try:
            raw = await _body_within(request, max_body_bytes)
            head, binary = split_body(raw, request.headers.get(HEADER_LENGTH))
            body = _parse_body(head, load_infer_body)
            payload, header_length, served = await run_in_threadpool(
                _run_inference, registry, name, version, body, binary, batcher, shared_memory
            )
        except NotServed as exc:
            status, message = 404, str(exc)
        except BodyTooLarge as exc:
            status, message = 413, str(exc)
        except InvalidInputError as exc:
            status, message = 400, str(exc)
        except Busy as exc:
            status, message = 503, f"{exc}; retry later"
        except InferenceError as exc:
            status, message = 500, str(exc)
        if status == 404:
            return _error(status, message)
        elapsed = time.perf_counter() - started
        metrics.record(name, served, elapsed, status == 200)
        if prometheus is not None:
            prometheus.record(name, elapsed, status == 200)
        if status != 200:
            return _error(status, message)
        if header_length is None:
            return Response(payload, media_type="application/json")
        return Response(
            payload,
            media_type="application/octet-stream",
            headers={"Inference-Header-Content-Length": str(header_length)},
        )

    return [
        Route("/v2/models/{name}/infer", infer, methods=["POST"]),
        Route("/v2/models/{name}/versions/{version}/infer", infer, methods=["POST"]),
    ]


def _shared_memory_routes(shared_memory: SharedMemoryRegions | None) -> list[Route]:
    """The system shared-memory extension: register, unregister, status (400 when it is off)."""

    async def shm_register(request: Request) -> Response:
        if shared_memory is None:
            return _error(400, SHM_OFF)
        try:
            body = _parse_body(await _body_within(request, 1 << 16))
            shared_memory.register(request.path_params["region"], body)
        except BodyTooLarge as exc:
            return _error(413, str(exc))
        except InvalidInputError as exc:
            return _error(400, str(exc))
        return JSONResponse({})

    def shm_unregister(request: Request) -> Response:
        if shared_memory is None:
            return _error(400, SHM_OFF)
        try:
            shared_memory.unregister(request.path_params.get("region"))
        except RegionError as exc:
            return _error(400, str(exc))
        return JSONResponse({})

    def shm_status(request: Request) -> Response:
        if shared_memory is None:
            return _error(400, SHM_OFF)
        try:
            return JSONResponse(shared_memory.status(request.path_params.get("region")))
        except RegionError as exc:
            return _error(400, str(exc))

    shm = "/v2/systemsharedmemory"
    return [
        Route(f"{shm}/status", shm_status, methods=["GET"]),
        Route(f"{shm}/region/{{region}}/status", shm_status, methods=["GET"]),
        Route(f"{shm}/region/{{region}}/register", shm_register, methods=["POST"]),
        Route(f"{shm}/unregister", shm_unregister, methods=["POST"]),
        Route(f"{shm}/region/{{region}}/unregister", shm_unregister, methods=["POST"]),
    ]
