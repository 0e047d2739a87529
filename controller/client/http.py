"""The HTTP client for the controller API: what the operator CLI and the demo send requests with
(the CLI's only httpx user).

Every failure becomes :class:`ApiError` with one line a person can act on. The bearer token and
the CA bundle come from the caller, or else from :mod:`controller.client.user_config` (``--token``,
``JETFLEET_TOKEN``, the file ``jetfleet login`` wrote).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from controller.client.user_config import DEFAULT_URL as DEFAULT_URL
from controller.client.user_config import ambient, same_controller

CHUNK = 1 << 20


class ApiError(Exception):
    """A request the controller refused, or could not be sent; ``str()`` is the one-line reason."""


def _file_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            yield chunk


class ControllerClient:
    """Thin typed-ish wrapper over ``/api/v1``; returns decoded JSON."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        token: str | None = None,
        ca_file: str | Path | None = None,
        ambient_credentials: bool = True,
    ) -> None:
        """``token`` None: the token (and, unless given, the CA file) of this CLI invocation's
        options, environment or config file; ``ambient_credentials`` False: none of those."""
        self.base_url = base_url.rstrip("/")
        if ambient_credentials and token is None:
            found = ambient(self.base_url)
            token = token if token is not None else found.token
            ca_file = ca_file if ca_file is not None else found.ca_file
        self.token = token
        self._verify = _verify(ca_file)
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout, headers=headers, verify=self._verify
        )

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
            raise ApiError(self._explain(response))
        return response.json() if response.content else None

    def _explain(self, response: httpx.Response) -> str:
        """The server's reason, plus what to do about a 401 or 403."""
        text = _error_text(response)
        if response.status_code == 401 and self.token is None:
            return (
                f"{text}: run `jetfleet login --url {self.base_url}` "
                "(or pass --token / set JETFLEET_TOKEN)"
            )
        if response.status_code == 401:
            return (
                f"{text}: log in again with a valid token (`jetfleet login --url {self.base_url}`)"
            )
        if response.status_code == 403:
            return f"{text}; use a token with that role (an admin runs `jetfleet tokens create`)"
        return text

    def whoami(self) -> Any:
        return self._request("GET", "/api/v1/whoami")

    def create_token(self, body: dict[str, Any]) -> Any:
        return self._request("POST", "/api/v1/tokens", json=body)

    def tokens(self) -> Any:
        return self._request("GET", "/api/v1/tokens")

    def revoke_token(self, token_id: str) -> Any:
        return self._request("DELETE", f"/api/v1/tokens/{token_id}")

    def audit(self, params: dict[str, Any]) -> Any:
        return self._request("GET", "/api/v1/audit", params=params)

    def download(self, url: str) -> bytes:
        """The bytes at ``url`` (e.g. a model's ``download_url``); the token goes along only
        when ``url`` is on this controller."""
        try:
            if same_controller(_origin(url), _origin(self.base_url)):
                response = self._http.get(url)
            else:
                with httpx.Client(timeout=self._http.timeout, verify=self._verify) as http:
                    response = http.get(url)
        except httpx.TransportError as exc:
            raise ApiError(
                f"cannot download {url} ({exc.__class__.__name__}): is the controller's public "
                "URL reachable from here?"
            ) from exc
        if response.status_code >= 400:
            raise ApiError(f"downloading {url} failed: {self._explain(response)}")
        return response.content

    def healthz(self) -> Any:
        return self._request("GET", "/healthz")

    def push_model(
        self,
        path: Path,
        name: str,
        version: str,
        shapes: Sequence[str] = (),
        values: Sequence[str] = (),
        inputs_sha256: str | None = None,
    ) -> Any:
        """Upload ``path`` as ``name:version``; ``shapes`` (``input=1x512``), ``values``
        (``sr=16000``) and ``inputs_sha256`` (a sample-inputs NPZ artifact): inputs the model
        accepts, for its reference outputs and warm-up."""
        params: list[tuple[str, str]] = [("shape", s) for s in shapes]
        params += [("value", v) for v in values]
        if inputs_sha256 is not None:
            params.append(("inputs_sha256", inputs_sha256))
        return self._request(
            "PUT",
            f"/api/v1/models/{name}/versions/{version}",
            content=_file_chunks(path),
            headers={"Content-Type": "application/octet-stream"},
            params=params,
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

    def push_agent_release(self, chunks: Iterator[bytes]) -> Any:
        """Upload an agent release (.deb or release .tar.gz) streamed from ``chunks``."""
        return self._request(
            "POST",
            "/api/v1/agent/releases",
            content=chunks,
            headers={"Content-Type": "application/octet-stream"},
        )

    def agent_releases(self) -> Any:
        return self._request("GET", "/api/v1/agent/releases")

    def start_agent_rollout(self, body: dict[str, Any]) -> Any:
        """Create a rollout of kind agent (``body`` as ``POST /api/v1/rollouts`` takes it)."""
        return self._request("POST", "/api/v1/rollouts", json={**body, "kind": "agent"})

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

    def set_labels(self, device_id: str, labels: dict[str, str]) -> Any:
        """Replace the device's whole label set."""
        return self._request("PUT", f"/api/v1/devices/{device_id}/labels", json={"labels": labels})

    def accept_class(self, device_id: str) -> Any:
        """Pin the device to the hardware class it reports now."""
        return self._request("POST", f"/api/v1/devices/{device_id}/accept-class")

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

    def approve_engine(self, key: str, tuning: str | None) -> Any:
        return self._request("POST", f"/api/v1/engines/{key}/approve", json={"tuning": tuning})

    def build_failure(self, key: str) -> Any:
        return self._request("GET", f"/api/v1/engines/{key}/failure")

    def forget_build_failure(self, key: str) -> Any:
        return self._request("DELETE", f"/api/v1/engines/{key}/failure")

    def engine_trust(self) -> Any:
        return self._request("GET", "/api/v1/engine-trust")

    def set_engine_trust(self, hardware_class: str, mode: str) -> Any:
        body = {"hardware_class": hardware_class, "mode": mode}
        return self._request("PUT", "/api/v1/engine-trust", json=body)

    def version_profiles(self, name: str, version: str) -> Any:
        """The newest on-device profile of ``name:version`` per device."""
        return self._request("GET", f"/api/v1/models/{name}/versions/{version}/profiles")


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


def _origin(url: str) -> str:
    """``scheme://host:port`` of ``url`` (its path dropped)."""
    parts = httpx.URL(url)
    return f"{parts.scheme}://{parts.netloc.decode('ascii')}"


def _verify(ca_file: str | Path | None) -> ssl.SSLContext | bool:
    """The CA bundle to trust for HTTPS (a controller with a private CA), else the system's."""
    if ca_file is None:
        return True
    try:
        return ssl.create_default_context(cafile=str(ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise ApiError(
            f"cannot use CA file {ca_file}: {exc}; check --ca-file / JETFLEET_CA_FILE"
        ) from exc
