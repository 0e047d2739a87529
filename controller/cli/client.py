"""The operator CLI's HTTP client for the controller API (the CLI's only httpx user).

Every failure becomes :class:`ApiError` with one line a person can act on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8080"
CHUNK = 1 << 20


class ApiError(Exception):
    """A request the controller refused, or could not be sent; ``str()`` is the one-line reason."""


def _file_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            yield chunk


class ControllerClient:
    """Thin typed-ish wrapper over ``/api/v1``; returns decoded JSON."""

    def __init__(self, base_url: str, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ControllerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ApiError(
                f"cannot reach the controller at {self.base_url} ({exc.__class__.__name__}): "
                "is `jetfleet serve` running? (set --url or JETFLEET_URL)"
            ) from exc
        if response.status_code >= 400:
            raise ApiError(_error_text(response))
        return response.json() if response.content else None

    def healthz(self) -> Any:
        return self._request("GET", "/healthz")

    def push_model(self, path: Path, name: str, version: str) -> Any:
        return self._request(
            "PUT",
            f"/api/v1/models/{name}/versions/{version}",
            content=_file_chunks(path),
            headers={"Content-Type": "application/octet-stream"},
        )

    def push_model_bytes(self, data: bytes, name: str, version: str) -> Any:
        return self._request(
            "PUT",
            f"/api/v1/models/{name}/versions/{version}",
            content=data,
            headers={"Content-Type": "application/octet-stream"},
        )

    def push_reference(self, path: Path, name: str, version: str) -> Any:
        return self._request(
            "PUT",
            f"/api/v1/models/{name}/versions/{version}/reference",
            content=path.read_bytes(),
            headers={"Content-Type": "application/octet-stream"},
        )

    def push_artifact(self, path: Path) -> Any:
        return self._request(
            "POST",
            "/api/v1/artifacts",
            content=_file_chunks(path),
            headers={"Content-Type": "application/octet-stream"},
        )

    def models(self) -> Any:
        return self._request("GET", "/api/v1/models")

    def model(self, name: str) -> Any:
        return self._request("GET", f"/api/v1/models/{name}")

    def model_version(self, name: str, version: str) -> Any:
        return self._request("GET", f"/api/v1/models/{name}/versions/{version}")

    def devices(self) -> Any:
        return self._request("GET", "/api/v1/devices")

    def device(self, device_id: str) -> Any:
        return self._request("GET", f"/api/v1/devices/{device_id}")

    def telemetry(self, device_id: str, limit: int) -> Any:
        return self._request(
            "GET", f"/api/v1/devices/{device_id}/telemetry", params={"limit": limit}
        )

    def deploy(self, body: dict[str, Any]) -> Any:
        return self._request("POST", "/api/v1/deployments", json=body)

    def undeploy(self, body: dict[str, Any]) -> Any:
        return self._request("POST", "/api/v1/deployments/remove", json=body)

    def put_config(self, name: str, scope: str, values: dict[str, Any]) -> Any:
        return self._request(
            "PUT", f"/api/v1/configs/{name}", json={"scope": scope, "values": values}
        )

    def configs(self) -> Any:
        return self._request("GET", "/api/v1/configs")

    def config(self, name: str) -> Any:
        return self._request("GET", f"/api/v1/configs/{name}")

    def delete_config(self, name: str, scope: str | None) -> Any:
        params = {} if scope is None else {"scope": scope}
        return self._request("DELETE", f"/api/v1/configs/{name}", params=params)

    def resolve_config(self, name: str | None, device_id: str, model: str) -> Any:
        if name is None:
            return self._request(
                "GET", f"/api/v1/devices/{device_id}/resolve", params={"model": model}
            )
        return self._request(
            "GET",
            f"/api/v1/configs/{name}/resolve",
            params={"device": device_id, "model": model},
        )

    def engines(self) -> Any:
        return self._request("GET", "/api/v1/engines")


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list):  # FastAPI request validation errors
        parts = [
            f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg')}"
            for d in detail
            if isinstance(d, dict)
        ]
        detail = "; ".join(parts)
    text = detail or response.text.strip() or response.reason_phrase
    return f"{text} (HTTP {response.status_code})"
