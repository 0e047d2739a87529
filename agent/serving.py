"""KServe v2 REST over FastAPI, served by uvicorn in a background thread.

Routes: ``/v2``, ``/v2/health/live``, ``/v2/health/ready``, ``/v2/models/<name>``,
``/v2/models/<name>/ready`` and ``POST /v2/models/<name>/infer``. Errors use KServe's shape
``{"error": "..."}``: 400 for a request that does not fit the model, 404 for an unknown model,
503 when a model's queue is full. Every infer request is counted in :class:`Metrics`.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from agent.errors import InferenceError, InvalidInputError, StartupError
from agent.kserve import decode_request, encode_outputs, requested_outputs
from agent.metrics import Metrics
from agent.registry import Busy, ModelRegistry, ServedModel
from agent.runtime import TensorSpec

PLATFORM = "onnxruntime_onnx"


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _tensors(specs: Any) -> list[dict[str, Any]]:
    return [
        {"name": s.name, "datatype": s.datatype, "shape": list(s.shape)}
        for s in specs
        if isinstance(s, TensorSpec)
    ]


def _parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise InvalidInputError(f"request body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidInputError("request body must be a JSON object")
    return body


def _run_inference(entry: ServedModel, body: dict[str, Any]) -> dict[str, Any]:
    with entry.lease() as model:
        feeds = decode_request(body, model.inputs)
        names = requested_outputs(body, model.outputs)
        results = model.infer(feeds)
    response: dict[str, Any] = {
        "model_name": entry.name,
        "model_version": entry.version,
        "outputs": encode_outputs(results, names),
    }
    if isinstance(body.get("id"), str):
        response["id"] = body["id"]
    return response


def create_app(
    registry: ModelRegistry,
    metrics: Metrics,
    is_ready: Callable[[], bool],
    server_version: str,
) -> FastAPI:
    """The KServe v2 app over ``registry``; ``is_ready`` says whether every desired slot serves."""
    app = FastAPI(title="jetfleet-agent KServe v2", version=server_version, openapi_url=None)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @app.get("/v2")
    def server_metadata() -> dict[str, Any]:
        return {"name": "jetfleet-agent", "version": server_version, "extensions": []}

    @app.get("/v2/health/live")
    def live() -> dict[str, bool]:
        return {"live": True}

    @app.get("/v2/health/ready")
    def ready() -> JSONResponse:
        ok = is_ready()
        return JSONResponse({"ready": ok}, status_code=200 if ok else 503)

    @app.get("/v2/models/{name}")
    def model_metadata(name: str) -> JSONResponse:
        entry = registry.get(name)
        if entry is None:
            return _error(404, f"model {name!r} is not being served")
        return JSONResponse(
            {
                "name": entry.name,
                "versions": [entry.version],
                "platform": PLATFORM,
                "inputs": _tensors(entry.model.inputs),
                "outputs": _tensors(entry.model.outputs),
            }
        )

    @app.get("/v2/models/{name}/ready")
    def model_ready(name: str) -> JSONResponse:
        if registry.get(name) is None:
            return _error(404, f"model {name!r} is not being served")
        return JSONResponse({"name": name, "ready": True})

    @app.post("/v2/models/{name}/infer")
    async def infer(name: str, request: Request) -> JSONResponse:
        entry = registry.get(name)
        if entry is None:
            return _error(404, f"model {name!r} is not being served")
        started = time.perf_counter()
        status, message = 200, ""
        try:
            body = _parse_body(await request.body())
            result = await run_in_threadpool(_run_inference, entry, body)
        except InvalidInputError as exc:
            status, message = 400, str(exc)
        except Busy as exc:
            status, message = 503, f"{exc}; retry later"
        except InferenceError as exc:
            status, message = 500, str(exc)
        metrics.record(entry.name, entry.version, time.perf_counter() - started, status == 200)
        if status != 200:
            return _error(status, message)
        return JSONResponse(result)

    return app


class ServingServer:
    """Runs an ASGI app with uvicorn in a daemon thread; ``start`` returns the bound port."""

    def __init__(self, app: FastAPI, host: str, port: int) -> None:
        self._host = host
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", access_log=False, lifespan="off"
        )
        config.ws = "none"
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self.port = port

    def start(self, timeout_s: float = 15.0) -> int:
        """Bind and start serving; StartupError naming the setting when that is impossible."""
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._host, self.port))
        except OSError as exc:
            sock.close()
            raise StartupError(
                f"cannot serve on {self._host}:{self.port} ({exc.strerror}): "
                "set JETFLEET_SERVE_ADDRESS to a free HOST:PORT"
            ) from exc
        self.port = int(sock.getsockname()[1])
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="kserve", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise StartupError(f"the KServe server on {self._host}:{self.port} did not start")
            time.sleep(0.02)
        return self.port

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop accepting requests, let in-flight ones finish, and join the thread."""
        self._server.should_exit = True
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout_s)
