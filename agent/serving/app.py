"""KServe v2 REST on Starlette, served by uvicorn in a background thread; Prometheus ``/metrics``.

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

The uvicorn thread runs under :class:`shared.supervision.Supervised` with policy ``exit``: a
gateway whose KServe server died serves nothing while it goes on reporting, so the process ends
(status 70) and systemd starts it again.

Starlette rather than FastAPI: the routes take no validated bodies (the KServe body is parsed
by :mod:`agent.serving.kserve`), and FastAPI's import alone costs an idle agent
~11 MB of RSS (issue 6).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from agent.errors import InferenceError, InvalidInputError, StartupError
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
from shared.supervision import Supervised

log = logging.getLogger(__name__)

PLATFORM = "onnxruntime_onnx"
EXTENSIONS = ["binary_tensor_data", "model_repository_metadata", "metrics"]
HEADER_LENGTH = "inference-header-content-length"
READ_SIZE = 1 << 20
"""Bytes asked of the socket per read. asyncio's default, 256 KiB, splits a 1x3x224x224 FP32
request (600 KB) into three reads, each a turn of the event loop with uvicorn pausing and
resuming the socket in between; reads of up to 1 MiB took 0.2 to 2.5 ms off such a request on
the 2-core VM (bench/results/serving_overhead.md)."""
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

    async def http_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        return _error(exc.status_code, str(exc.detail))

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

    get = ["GET"]
    shm = "/v2/systemsharedmemory"
    routes = [
        Route(f"{shm}/status", shm_status, methods=get),
        Route(f"{shm}/region/{{region}}/status", shm_status, methods=get),
        Route(f"{shm}/region/{{region}}/register", shm_register, methods=["POST"]),
        Route(f"{shm}/unregister", shm_unregister, methods=["POST"]),
        Route(f"{shm}/region/{{region}}/unregister", shm_unregister, methods=["POST"]),
        Route("/v2", server_metadata, methods=get),
        Route("/metrics", metrics_text, methods=get),
        Route("/v2/health/live", live, methods=get),
        Route("/v2/health/ready", ready, methods=get),
        Route("/v2/models/{name}", model_metadata, methods=get),
        Route("/v2/models/{name}/versions/{version}", model_metadata, methods=get),
        Route("/v2/models/{name}/ready", model_ready, methods=get),
        Route("/v2/models/{name}/versions/{version}/ready", model_ready, methods=get),
        Route("/v2/models/{name}/infer", infer, methods=["POST"]),
        Route("/v2/models/{name}/versions/{version}/infer", infer, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={StarletteHTTPException: http_error})


class _HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, reading up to :data:`READ_SIZE` bytes per ``recv``."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # asyncio's selector transport reads ``self.max_size`` bytes per recv (a class
        # attribute); other loops' transports may not have it, and keep their own size.
        if hasattr(transport, "max_size"):
            transport.max_size = READ_SIZE
        super().connection_made(transport)


class ServingServer:
    """Runs an ASGI app with uvicorn in a daemon thread; ``start`` returns the bound port.

    Once started, a server that stops without :meth:`stop` (its loop raised, or it returned on
    its own) calls ``on_fatal(name, exc)``: by default the process exits so systemd restarts it.
    """

    def __init__(
        self,
        app: Starlette,
        host: str,
        port: int,
        on_fatal: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self._host = host
        self._on_fatal = on_fatal
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            http=_HttpProtocol,
        )
        config.ws = "none"
        self._server = uvicorn.Server(config)
        self._thread: Supervised | None = None
        self.port = port

    def start(self, timeout_s: float = 15.0) -> int:
        """Bind and start serving; StartupError naming the setting when that is impossible."""
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Accepted connections inherit it: without it, a response written in two parts
            # (head, body) waits for the client's delayed ACK, ~40 ms per request on Linux.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind((self._host, self.port))
        except OSError as exc:
            sock.close()
            raise StartupError(
                f"cannot serve on {self._host}:{self.port} ({exc.strerror}): "
                "set JETFLEET_SERVE_ADDRESS to a free HOST:PORT"
            ) from exc
        self.port = int(sock.getsockname()[1])
        self._thread = Supervised(
            "kserve", lambda: self._serve(sock), policy="exit", on_fatal=self._on_fatal, logger=log
        ).start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise StartupError(f"the KServe server on {self._host}:{self.port} did not start")
            time.sleep(0.02)
        return self.port

    def _serve(self, sock: socket.socket) -> None:
        """The thread's body: serve until :meth:`stop`; any other end raises (fatal).

        A failure before the server started is only logged: :meth:`start` reports it as a
        StartupError, as it does for a port that is taken.
        """
        try:
            self._server.run(sockets=[sock])
        except BaseException:
            if not self._server.started or self._server.should_exit:
                log.exception("the KServe server on %s:%s failed", self._host, self.port)
                return
            raise
        if self._server.started and not self._server.should_exit:
            raise RuntimeError(f"the KServe server on {self._host}:{self.port} stopped by itself")

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop accepting requests, let in-flight ones finish, and join the thread."""
        self._server.should_exit = True
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout_s)
