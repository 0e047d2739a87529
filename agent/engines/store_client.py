"""HTTP client of the controller's engine store (the contract in shared.engines).

``GET/PUT /api/v1/engines/{key}`` (manifests, one per tuning tag; GET takes ``?tuning=``),
``POST/DELETE /api/v1/engines/{key}/lease`` (who builds, per key and tuning tag),
``POST /api/v1/artifacts`` and ``GET /api/v1/artifacts/{sha}`` (the bytes, possibly through a
redirect to a presigned object-store URL; the sha256 is checked either way).
HTTP goes through :mod:`agent.link.http`, whose one classification decides the error:
:class:`StoreUnavailable` (transient: no answer, 408, 425, 429, 5xx; the device builds alone)
and :class:`StoreRejected` (the store said no: a 4xx it should not give).
"""

from __future__ import annotations

import hashlib
import os
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agent.errors import IntegrityError, PermanentError, TransientError
from agent.link.http import Answer, HttpClient, Unreachable
from shared.engines import (
    ArtifactOut,
    BuildFailure,
    BuildFailureOut,
    EngineManifest,
    LeaseOut,
    LeaseRequest,
)

CHUNK = 1 << 20

_Answer = TypeVar("_Answer", bound=BaseModel)


class StoreUnavailable(TransientError):
    """The engine store cannot be reached right now; resolution goes on without it."""


class StoreRejected(PermanentError):
    """The engine store refused a request; the message has its answer."""


class StoreConflict(StoreRejected):
    """Another manifest is already stored under this engine key (PUT answered 409)."""


def _file_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk


class StoreClient:
    """One controller's engine store; reuse an instance (it pools connections)."""

    def __init__(
        self,
        base_url: str,
        timeout_s: float = 30.0,
        token: str | None = None,
        verify: bool | ssl.SSLContext = True,
    ) -> None:
        """``token``: the agent's API token (role device); ``verify``: see
        :func:`agent.link.http.controller_tls` (True: the system's CA store)."""

        self.base_url = base_url.rstrip("/")
        # follow a download's redirect to a presigned object-store URL (--artifact-redirect); the
        # token is not sent there (httpx drops Authorization on a redirect to another origin)
        self._http = HttpClient(
            self.base_url, token=token, verify=verify, timeout_s=timeout_s, follow_redirects=True
        )

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, url: str, **kwargs: Any) -> Answer:
        try:
            answer = self._http.request(method, url, **kwargs)
        except Unreachable as exc:
            raise StoreUnavailable(
                f"engine store at {self.base_url} unreachable ({method} {url}: {exc.reason})"
            ) from exc
        if answer.verdict == "transient":
            raise StoreUnavailable(f"engine store {method} {url} answered HTTP {answer.status}")
        return answer

    @staticmethod
    def _reject(answer: Answer, what: str) -> StoreRejected:
        return StoreRejected(f"{what}: HTTP {answer.status} {answer.text[:300]}")

    def _get_or_none(
        self, model: type[_Answer], path: str, what: str, params: dict[str, str] | None = None
    ) -> _Answer | None:
        """GET ``path`` as ``model``; None on 404, StoreRejected on another answer."""
        answer = self._send("GET", path, params=params)
        if answer.status == 404:
            return None
        if answer.status != 200:
            raise self._reject(answer, f"GET {path}")
        try:
            return model.model_validate_json(answer.content)
        except ValidationError as exc:
            raise StoreRejected(f"engine store sent an invalid {what} for {path}: {exc}") from exc

    def get_manifest(self, key: str, tuning: str | None = None) -> EngineManifest | None:
        """The stored manifest of ``key`` tuned under ``tuning`` (a ``TuningTag.label()``) when
        the store has one, else one of another tuning; None when the store has none."""
        params = {"tuning": tuning} if tuning is not None else None
        return self._get_or_none(EngineManifest, f"/api/v1/engines/{key}", "manifest", params)

    def put_manifest(self, manifest: EngineManifest) -> None:
        """Store ``manifest`` under its tuning (this releases that (key, tuning) build lease)."""
        answer = self._send(
            "PUT",
            f"/api/v1/engines/{manifest.engine_key}",
            content=manifest.model_dump_json(),
            headers={"Content-Type": "application/json"},
        )
        if answer.status == 409:
            raise StoreConflict(
                f"engine store holds another manifest under {manifest.engine_key[:12]} "
                f"({manifest.tuning.label()})"
            )
        if answer.status not in (200, 201):
            raise self._reject(answer, f"PUT engine {manifest.engine_key[:12]}")

    def build_failure(self, key: str) -> BuildFailureOut | None:
        """Why TensorRT could not build ``key`` on a twin, if the store remembers that."""
        return self._get_or_none(BuildFailureOut, f"/api/v1/engines/{key}/failure", "failure")

    def report_build_failure(self, key: str, report: BuildFailure) -> None:
        """Tell the store that TensorRT could not build ``key`` here (for the twins)."""
        answer = self._send(
            "PUT",
            f"/api/v1/engines/{key}/failure",
            content=report.model_dump_json(),
            headers={"Content-Type": "application/json"},
        )
        if answer.status != 200:
            raise self._reject(answer, f"report of the failed build of {key[:12]}")

    def lease(self, key: str, device_id: str, ttl_s: float, tuning: str = "default") -> LeaseOut:
        """Ask to be the device that builds ``key`` under ``tuning`` (granted, or who holds it
        until when)."""
        body = LeaseRequest(device_id=device_id, ttl_s=ttl_s, tuning=tuning)
        answer = self._send(
            "POST",
            f"/api/v1/engines/{key}/lease",
            content=body.model_dump_json(),
            headers={"Content-Type": "application/json"},
        )
        if answer.status != 200:
            raise self._reject(answer, f"lease on engine {key[:12]}")
        try:
            return LeaseOut.model_validate_json(answer.content)
        except ValidationError as exc:
            raise StoreRejected(f"engine store sent an invalid lease answer: {exc}") from exc

    def release(self, key: str, device_id: str, tuning: str = "default") -> None:
        """Give the build lease of (``key``, ``tuning``) back (idempotent)."""
        answer = self._send(
            "DELETE",
            f"/api/v1/engines/{key}/lease",
            params={"device_id": device_id, "tuning": tuning},
        )
        if answer.status not in (200, 204, 404):
            raise self._reject(answer, f"release of lease on {key[:12]}")

    def upload(self, path: Path, sha256: str) -> ArtifactOut:
        """Stream ``path`` to the artifact store, which verifies ``sha256``."""
        answer = self._send(
            "POST",
            "/api/v1/artifacts",
            params={"sha256": sha256},
            content=_file_chunks(path),
            headers={"Content-Type": "application/octet-stream"},
        )
        if answer.status not in (200, 201):
            raise self._reject(answer, f"upload of {path.name}")
        return ArtifactOut.model_validate_json(answer.content)

    def download(self, sha256: str, size: int | None, dest: Path) -> None:
        """Fetch artifact ``sha256`` into ``dest`` (fsynced); IntegrityError on other bytes.

        ``size`` None: only the sha256 is checked (a config names a calibration cache by hash).
        """
        digest = hashlib.sha256()
        written = 0
        url = f"/api/v1/artifacts/{sha256}"
        try:
            with self._http.stream("GET", url) as got:
                if got.verdict == "transient":
                    raise StoreUnavailable(f"GET {url} answered HTTP {got.status}")
                if got.status != 200:
                    raise StoreRejected(f"GET {url} answered HTTP {got.status}")
                with dest.open("wb") as f:
                    for chunk in got.chunks(CHUNK):
                        digest.update(chunk)
                        written += len(chunk)
                        f.write(chunk)
                    f.flush()
                    os.fsync(f.fileno())
        except Unreachable as exc:
            dest.unlink(missing_ok=True)
            raise StoreUnavailable(
                f"download of engine {sha256[:12]} failed: {exc.reason}"
            ) from exc
        if digest.hexdigest() != sha256 or (size is not None and written != size):
            dest.unlink(missing_ok=True)
            raise IntegrityError(
                f"engine artifact {sha256[:12]} arrived as {written} bytes with sha256 "
                f"{digest.hexdigest()[:12]}; expected {size} bytes"
            )
